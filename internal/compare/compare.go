// Package compare is `opx compare BASE NEW`: two runs' cases joined on the stable case key,
// each classed faster, slower, same or ambiguous by its headline metric and its noise.
//
// Files by concern: compare.go the result's types; flags.go --key and the filters; read.go
// reading a side; join.go joining and classing; noise.go the noise rule; render.go the
// Markdown; json.go the JSON; junit.go the JUnit XML.
package compare

// Classes, in the order the summary lists them.
const (
	Slower     = "slower"
	Broken     = "broken"
	Impossible = "impossible" // a row above its hardware's limit: never an improvement
	Faster     = "faster"
	Fixed      = "fixed"
	Ambiguous  = "ambiguous"
	Same       = "same"
	Unmeasured = "unmeasured"
	OnlyBase   = "only-base"
	OnlyNew    = "only-new"
)

var classOrder = []string{Slower, Broken, Impossible, Faster, Fixed, Ambiguous, Same, Unmeasured, OnlyBase, OnlyNew}

// Options are the thresholds, as fractions (0.02 = 2 %), and the join.
type Options struct {
	Same     float64  `json:"same"`      // changes smaller than this are "same"
	NoSpread float64  `json:"no_spread"` // without spreads, changes at least this large are faster/slower
	Key      []string `json:"key"`       // the case-key fields the runs are joined on (nil: all)
	Base     Filter   `json:"base_filter,omitempty"`
	New      Filter   `json:"new_filter,omitempty"`
	below    string   // "change below <Same>", the noise of every "same" metric: set by Join, which every case is built from
}

// DefaultOptions: 2 % and 5 %.
var DefaultOptions = Options{Same: 0.02, NoSpread: 0.05}

// Metric is one metric's comparison.
type Metric struct {
	Name      string  `json:"name"`
	Direction string  `json:"direction"`
	Base      float64 `json:"base"`
	New       float64 `json:"new"`
	Ratio     float64 `json:"ratio"`   // new / base
	Speedup   float64 `json:"speedup"` // above 1 is faster: base/new for a time, new/base for a throughput
	Change    string  `json:"change"`  // the speed-up in words: "1.53x faster", "1.53x slower"
	Class     string  `json:"class"`
	Noise     string  `json:"noise"`
	BaseLo    float64 `json:"base_lo,omitempty"`
	BaseHi    float64 `json:"base_hi,omitempty"`
	NewLo     float64 `json:"new_lo,omitempty"`
	NewHi     float64 `json:"new_hi,omitempty"`
}

// Case is one case key's comparison.
type Case struct {
	Key        string   `json:"key"`
	Testlist   string   `json:"testlist"`
	OpType     string   `json:"op_type"`
	Args       string   `json:"args"`
	Backend    string   `json:"backend"`
	Cluster    string   `json:"cluster"`
	WorldSize  int      `json:"world_size"`
	BaseStatus string   `json:"base_status,omitempty"`
	NewStatus  string   `json:"new_status,omitempty"`
	NewMessage string   `json:"new_message,omitempty"`
	Class      string   `json:"class"`
	Primary    *Metric  `json:"primary,omitempty"`
	Metrics    []Metric `json:"metrics,omitempty"`
	// PctOfRoofline is each run's row against its hardware's limits (internal/sol), when
	// judged: {"base": %, "new": %}.
	PctOfRoofline *Roofline `json:"pct_of_roofline,omitempty"`
	// Contended names the sides ("base", "new") whose row was measured under contention
	// (another opx run on its machine, a busy machine): a change not to trust before it is
	// measured again.
	Contended []string `json:"contended,omitempty"`
}

// Roofline is each run's % of the roofline; a side not judged has none (0, left out).
type Roofline struct {
	Base float64 `json:"base,omitempty"`
	New  float64 `json:"new,omitempty"`
}

// Side names a run.
type Side struct {
	Dir       string `json:"dir"`
	RunID     string `json:"run_id"`
	SourceSHA string `json:"source_sha"`
	// At is when the run measured: its first allocation (RFC 3339, UTC; "" when it
	// recorded none).
	At        string `json:"at,omitempty"`
	Rows      int    `json:"rows"`
	Duplicate int    `json:"duplicate_keys"`
	// Measured is how many of its cases, after its filter and the join, are measured
	// (internal/verdict): a side with none cannot be compared, and fails compare.
	Measured int `json:"measured"`
	// IgnoredSpreads counts its metrics whose recorded spread could not be one (inverted,
	// below zero, not containing the value): judged as having none.
	IgnoredSpreads int `json:"ignored_spreads"`
}

// Result is the whole comparison.
type Result struct {
	Base    Side           `json:"base"`
	New     Side           `json:"new"`
	Options Options        `json:"thresholds"`
	Counts  map[string]int `json:"counts"`
	// Nodes is where the two runs' nodes differ in what decides a GPU's speed (their
	// fingerprints: GPU, driver, toolkit, power limit, max SM clock, ECC, MIG);
	// Throttled counts each run's rows measured on a throttled GPU.
	Nodes     []string       `json:"node_differences"`
	Throttled map[string]int `json:"throttled_rows"`
	// Contended counts each run's compared rows measured under contention.
	Contended map[string]int `json:"contended_rows"`
	// Problems are why the comparison cannot be trusted, one line each: a side with no
	// measured case after its filter, a join key that is not unique in a run. compare
	// fails on the first kind always, and the gate on any. Warnings are what was set
	// aside (spreads that cannot be one).
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
	empty    bool
	cases    []joined // WriteJSON writes them as "cases", each built again (Case)
}
