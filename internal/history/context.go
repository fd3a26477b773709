// Where a point was measured, as the store keeps it: its node, GPU, driver, image, clocks,
// contention and machine kind (context_), read off a shard's fingerprint.

package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/results"
)

// context_ is where and on what a point was measured: what a change is tied to.
type context_ struct {
	Node, GPU, Driver, ImageDigest, SMClock, Throttle string
	// Kind is what kind of machine measured (machineKind; revision 3): what tells a
	// pool's machines apart. "" in a context of before it (kind derives one).
	Kind string
	// Contended is what contended with the measurement (results.Row.Contended): check
	// never opens a change on such points alone, and the gate asks for them again
	Contended string
}

// kind is what kind of machine the context is, as the detector tells a pool's machines
// apart (changes.Obs.Kind): its recorded Kind, else (a context of before revision 3) its
// GPU model and max SM clock; "" without either.
func (c context_) kind() string {
	switch {
	case c.Kind != "":
		return c.Kind
	case c.GPU == "":
		return ""
	case c.SMClock == "":
		return c.GPU
	}
	return c.GPU + " at " + c.SMClock
}

func (c context_) digest() string {
	parts := []string{c.Node, c.GPU, c.Driver, c.ImageDigest, c.SMClock, c.Throttle}
	if c.Contended != "" { // a quiet context keeps the digest it had before contention was kept
		parts = append(parts, c.Contended)
	}
	if c.Kind != "" { // and one of no kind the digest it had before kinds were kept
		parts = append(parts, "kind", c.Kind)
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// shardContext is the shard's provenance as a point keeps it: its node (the fingerprint's,
// else the hosts its results name), GPU model, driver, image digest and clocks.
func shardContext(sh *results.Shard) context_ {
	c := context_{ImageDigest: sh.Digest, Node: strings.Join(sh.Hosts, ",")}
	f := sh.Before
	if f == nil {
		f = sh.After
	}
	if f != nil {
		if f.Node != "" {
			c.Node = f.Node
		}
		n := f.Summary()
		c.GPU, c.Driver, c.SMClock = n.Models, f.Driver, n.MaxSMClock
		c.Kind = machineKind(f, n)
	}
	return c
}

// machineKind is what kind of machine a fingerprint is, in words: its GPUs' model and max
// SM clock ("NVIDIA H200 at 1980 MHz": the words an opx of before revision 3 is read as,
// so a store's old and new runs of one machine are one kind); without a GPU, its CPU model,
// cores and memory ("AMD EPYC 9654 96-Core Processor, 192 cores, 755 GiB"). Two machines
// of one kind measure alike; a pool of kinds is judged kind by kind. What varies on one
// machine (its enforced power limit, a kernel's CPU flags) is in the fingerprint, not here.
func machineKind(f *fingerprint.Fingerprint, n fingerprint.Node) string {
	if n.Models != "" {
		return context_{GPU: n.Models, SMClock: n.MaxSMClock}.kind()
	}
	if f.CPU == "" {
		return ""
	}
	parts := []string{f.CPU}
	if f.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", f.Cores))
	}
	if f.MemMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", (f.MemMiB+512)/1024))
	}
	return strings.Join(parts, ", ")
}
