package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"strings"

	"github.com/semianalysis/opx/internal/pyjson"
)

// PinnedDigest is the seed's _pinned_digest: the text after the last "@" of a
// digest-pinned reference, else "".
func PinnedDigest(image string) string {
	if !strings.Contains(image, "@sha256:") {
		return ""
	}
	return image[strings.LastIndex(image, "@")+1:]
}

// ImageKey is sha256(image + digest + suffix), the suffix ":<platform>" for non-amd64
// platforms (docs/compat-spec.md §3.2).
func ImageKey(image, digest, imagePlatform string) string {
	suffix := ""
	if imagePlatform != "linux/amd64" {
		suffix = ":" + imagePlatform
	}
	sum := sha256.Sum256([]byte(image + digest + suffix))
	return hex.EncodeToString(sum[:])
}

// QueueToken is the first 32 hex of sha256("<run_id>:<attempt>:<cell id>") (docs/compat-spec.md §5.7).
func QueueToken(runID, attempt, id string) string {
	sum := sha256.Sum256([]byte(runID + ":" + attempt + ":" + id))
	return hex.EncodeToString(sum[:])[:32]
}

// MasterPort is 29500 + sha256("<job>:<cell id>") mod 2000 (docs/compat-spec.md §6 step 11).
func MasterPort(job, id string) int {
	sum := sha256.Sum256([]byte(job + ":" + id))
	n := new(big.Int).SetBytes(sum[:])
	return 29500 + int(new(big.Int).Mod(n, big.NewInt(2000)).Int64())
}

// Resolution is what a registry says about one image tag.
type Resolution struct {
	Digest         string // the tag's manifest (or index) digest; "" when unavailable
	PlatformDigest string // for a multi-arch index: the manifest digest for the platform
	NoPlatform     bool   // the image exists but has no manifest for the platform
}

// ValidDigest reports whether d is a sha256 manifest digest: "sha256:" and 64 lowercase hex.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Narrow is a copy of a cell's raw object — its members in their order — holding only the
// cases at the indexes keep (in that order): the one way a cell is cut to some of its cases
// (opx resume's cells of what is left to run, opx history check's confirmation cells). The
// cell itself is left as it was; the caller renews its queue token (QueueToken).
func Narrow(raw *pyjson.Object, keep []int) *pyjson.Object {
	out := pyjson.NewObject()
	for _, m := range raw.Members() {
		out.Set(m.Key, m.Value)
	}
	all, _ := raw.Array("cases")
	cases := make([]pyjson.Value, 0, len(keep))
	for _, i := range keep {
		cases = append(cases, all[i])
	}
	out.Set("cases", cases)
	return out
}
