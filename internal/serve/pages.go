package serve

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/plot"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/verdict"
	"github.com/semianalysis/opx/internal/version"
)

// dash is the dashboard: the store, and the check and run list of the store's runs as
// they were (history.Store.State), kept until a run is added. The check is the one the add
// kept in the store (adopt), else the dashboard's own: that takes tens of seconds on the
// largest stores, and a page asked for while the store's new state is being checked waits
// for it up to fresh, then shows the check before, said to be so.
type dash struct {
	st    atomic.Pointer[history.Store] // the store: store() reopens it when its file was replaced
	gen   atomic.Int64                  // how many times it was reopened: part of every state
	swap  sync.Mutex                    // one reopen at a time
	where string
	mu    sync.Mutex
	state string // what the kept check and runs are of
	found *history.Found
	runs  []history.RunSummary
	// refreshing is the refresh in progress (nil when none): closed when it ends, with
	// refreshErr its error
	refreshing chan struct{}
	refreshErr error
	// stopRefresh ends the refresh in progress: a check kept by the add (adopt) made it
	// needless
	stopRefresh context.CancelFunc
	reopenErr   atomic.Pointer[error]      // why the replaced store could not be opened again
	allIDs      map[string]map[string]bool // the ids of every series' changes, by state (anyChange)
	// triaged is the kept check's changes with their triage as of triage version
	// triagedAt (history.Store.TriageVersion), of the check of triagedOf
	triaged              []history.Change
	triagedAt, triagedOf int64
	checks               int64 // how many checks were kept, for triagedOf
	// judging counts the checks this dashboard started itself, adopted those it took
	// from the store (tests)
	judging, adopted int64
	cache            pageCache
	// compares keeps two stored runs compared (the page and the JSON), by the store's
	// state and the runs' ids: at most 2 answers, the JSON of 128,000 cases a side being
	// about 110 MB (gzipped, tried: a 2-core machine's clients then spend longer expanding
	// it than the copy takes)
	compares pageCache
	// results keeps the comparisons of two stored runs themselves (at most 2, by the same
	// key): a window of one (/api/compare's default) is written from it, each made once
	// however many ask for it at the same time
	results map[string]*comparedEntry
}

// comparedEntry is a comparison of two stored runs, made once: done is closed when r (or
// err) is set.
type comparedEntry struct {
	done chan struct{}
	r    *compare.Result
	err  error
}

// fresh is how long a page waits for the check of a store that changed before showing
// the check before it.
const fresh = 2 * time.Second

func newDash(s *history.Store, where string) *dash {
	d := &dash{where: where, compares: pageCache{max: 2}}
	d.st.Store(s)
	return d
}

// store is the store the dashboard reads: the one it opened, or, once the SQLite file at
// its path was replaced (the workflow's new artifact, a restored backup), the file there
// now — opened again once the old one's WAL is emptied into its own file and it is closed
// (history.Store.Reopen: the WAL at the path is the old file's), every kept check let go
// (the state names the store's generation). While the old store is still being read it
// serves on, and the next request tries again; when what is there cannot be opened, every
// request fails saying why (/healthz too) until a store is.
func (d *dash) store() *history.Store {
	s := d.st.Load()
	if !s.Replaced() {
		return s
	}
	d.swap.Lock()
	defer d.swap.Unlock()
	if s = d.st.Load(); !s.Replaced() {
		return s
	}
	ns, err := s.Reopen(context.Background())
	if errors.Is(err, history.ErrBusy) {
		return s // read still: the next request tries again
	}
	if err != nil { // the old store is closed (its WAL emptied): every request says why until a store is there
		d.reopenErr.Store(&err)
		return s
	}
	d.reopenErr.Store(nil)
	d.gen.Add(1)
	d.st.Store(ns)
	return ns
}

// state is the store's state (history.Store.State), of its generation.
func (d *dash) stateOf(ctx context.Context) (string, error) {
	s := d.store()
	gen := d.gen.Load()
	st, err := s.State(ctx)
	return fmt.Sprintf("%d:%s", gen, st), err
}

// warm starts the first check, so that the first page does not wait for all of it (or
// takes the one the last add kept).
func (d *dash) warm() {
	if state, err := d.stateOf(context.Background()); err == nil && !d.adopt(context.Background(), state) {
		d.mu.Lock()
		d.startRefresh(state)
		d.mu.Unlock()
	}
}

// adopt takes the check the add that made the store's state kept of it
// (history.Store.KeptCheck), when there is one, and ends a refresh it makes needless:
// after a nightly add the pages show its check at once. Whether one was taken; a kept
// check that cannot be read is judged again, as when there is none.
func (d *dash) adopt(ctx context.Context, state string) bool {
	_, raw, _ := strings.Cut(state, ":")
	s := d.store()
	f, err := s.KeptCheck(ctx, raw)
	if err != nil || f == nil {
		return false
	}
	runs, err := s.RunList(ctx)
	if err != nil {
		return false
	}
	// the store still in that state: the check and the runs are both of it, and no
	// refresh of a newer state is running (an add since: its own check or refresh)
	if now, err := d.stateOf(ctx); err != nil || now != state {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != state {
		d.state, d.found, d.runs = state, f, runs
		d.checks++
		d.adopted++
		if d.stopRefresh != nil {
			d.stopRefresh()
		}
	}
	return true
}

// startRefresh starts checking the store as it is in state, unless a check is running;
// d.mu is held.
func (d *dash) startRefresh(state string) chan struct{} {
	if d.refreshing != nil {
		return d.refreshing
	}
	done := make(chan struct{})
	// not a request's context (its client may leave); ended by adopt
	ctx, cancel := context.WithCancel(context.Background())
	d.refreshing, d.stopRefresh, d.judging = done, cancel, d.judging+1
	checks := d.checks
	go func() {
		defer cancel()
		s := d.store()
		found, err := s.NewestCheck(ctx)
		var runs []history.RunSummary
		if err == nil {
			runs, err = s.RunList(ctx)
		}
		d.mu.Lock()
		switch {
		case d.checks != checks: // a kept check was taken meanwhile: it is of the newer state
			err = nil
		case err == nil:
			d.state, d.found, d.runs = state, found, runs
			d.checks++
		}
		d.refreshErr, d.refreshing, d.stopRefresh = err, nil, nil
		close(done)
		d.mu.Unlock()
	}()
	return done
}

// current is the check of the newest run and every run's summary — worked out again
// when the store's runs changed — and whether it is the check of the store before a run
// added since (stale); triage is read fresh each time.
func (d *dash) current(ctx context.Context) (*history.Found, []history.RunSummary, bool, error) {
	f, runs, stale, _, err := d.currentVersion(ctx)
	return f, runs, stale, err
}

// currentVersion is current, and a version of what it returned: the same while neither
// the check kept nor the triage changed.
func (d *dash) currentVersion(ctx context.Context) (*history.Found, []history.RunSummary, bool, string, error) {
	state, err := d.stateOf(ctx)
	if err != nil {
		return nil, nil, false, "", err
	}
	d.mu.Lock()
	if d.found == nil || state != d.state {
		d.mu.Unlock()
		d.adopt(ctx, state)
		d.mu.Lock()
	}
	if d.found == nil || state != d.state {
		done, have := d.startRefresh(state), d.found != nil
		d.mu.Unlock()
		var timeout <-chan time.Time
		if have {
			timeout = time.After(fresh)
		}
		select {
		case <-done:
		case <-timeout:
		case <-ctx.Done():
			return nil, nil, false, "", ctx.Err()
		}
		d.mu.Lock()
		if d.found == nil {
			err := d.refreshErr
			d.mu.Unlock()
			return nil, nil, false, "", err
		}
	}
	stale := d.state != state
	f := *d.found
	runs, checks := d.runs, d.checks
	triaged, at, of := d.triaged, d.triagedAt, d.triagedOf
	d.mu.Unlock()
	// the changes' triage, read again only when an event was recorded since
	version, err := d.store().TriageVersion(ctx)
	if err != nil {
		return nil, nil, false, "", err
	}
	if triaged == nil || at != version || of != checks {
		triaged = slices.Clone(f.Changes)
		if err := d.store().Triaged(ctx, triaged); err != nil {
			return nil, nil, false, "", err
		}
		d.mu.Lock()
		if d.checks == checks {
			d.triaged, d.triagedAt, d.triagedOf = triaged, version, checks
		}
		d.mu.Unlock()
	}
	f.Changes = triaged // shared: read, never written
	return &f, runs, stale, fmt.Sprintf("%d/%d/%t", checks, version, stale), nil
}

// page is what every page's template gets.
type page struct {
	Title, Store, Generator string
	Body                    any
}

//go:embed pages.html
var pagesHTML string

var tmpl = template.Must(template.New("pages").Funcs(template.FuncMap{
	"words": compare.Words,
	// svg is a series' plot: numbers and escaped text alone (plot.SVG)
	"svg": func(s plot.Series) template.HTML { return template.HTML(plot.SVG(s)) },
	"num": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return strconv.FormatFloat(*p, 'g', 4, 64)
	},
	// val is a metric's value with its unit, as report.html shows it (38.06 ms)
	"val": func(metric string, v any) string {
		switch v := v.(type) {
		case *float64:
			if v == nil {
				return "–"
			}
			return results.Format(metric, *v)
		case float64:
			return results.Format(metric, v)
		}
		return "–"
	},
	"name": history.CaseName,
	"pct": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return strconv.FormatFloat(*p, 'f', 1, 64) + "%"
	},
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"hours": func(h float64) string { return strconv.FormatFloat(h, 'g', 4, 64) },
}).Parse(pagesHTML))

// render writes the page named name (a template of pages.html) with body.
func (d *dash) render(w http.ResponseWriter, name, title string, body any) {
	if b, err := d.page(name, title, body); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
	} else {
		writeHTML(w, b)
	}
}

func (d *dash) page(name, title string, body any) ([]byte, error) {
	var b bytes.Buffer
	err := tmpl.ExecuteTemplate(&b, name, page{Title: title, Store: d.where, Generator: "opx " + version.Version, Body: body})
	return b.Bytes(), err
}

func writeHTML(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// pageCache keeps the changes page as rendered, by its query and what it was made of
// (currentVersion): the page every member of a team opens is made once per new run or
// triage event, not once per load. It holds at most max pages (64 when 0), and starts
// over when full.
type pageCache struct {
	mu    sync.Mutex
	pages map[string][]byte
	max   int
}

func (c *pageCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.pages[key]
	return b, ok
}

func (c *pageCache) put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pages == nil || len(c.pages) >= cmp.Or(c.max, 64) {
		c.pages = map[string][]byte{}
	}
	c.pages[key] = b
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// fail answers a request that could not be served: 404 for what the store does not hold,
// 400 for a bad query, 503 when the store did not answer.
func fail(w http.ResponseWriter, code int, err error) {
	http.Error(w, err.Error(), code)
}

func (d *dash) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	st := d.store()
	if e := d.reopenErr.Load(); e != nil {
		http.Error(w, "the store's file was replaced, and what is there now cannot be opened: "+(*e).Error()+" (opx serve opens it as soon as it can be)", http.StatusServiceUnavailable)
		return
	}
	if err := st.Ping(ctx); err != nil {
		http.Error(w, "the store does not answer: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	newest := "no run yet"
	if at, err := st.NewestAdded(ctx); err == nil && !at.IsZero() {
		newest = fmt.Sprintf("newest run added %s (%s ago)", at.UTC().Format(time.RFC3339), time.Since(at).Round(time.Second))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "ok\nstore: %s\n%s\n", safe.Text(st.Identity()), newest)
}

// changesData is the changes of the newest run, filtered, worst first, with what else
// the check found.
type changesData struct {
	// Stale is whether a run was added since the check shown: it is being checked
	Stale  bool   `json:"stale"`
	Newest string `json:"newest_run"`
	Series int    `json:"series"`
	// Judged counts the series that could be judged; Young lists the rest: too few
	// measured runs (history check's "too young to judge")
	Judged     int                   `json:"judged"`
	Young      []history.YoungSeries `json:"young"`
	Needs      int                   `json:"young_needs_runs"`
	Changes    []history.Change      `json:"changes"`
	Stopped    []history.Stopped     `json:"stopped"`
	Unmeasured []history.Stopped     `json:"unmeasured"`
	OddNodes   map[string]int        `json:"odd_nodes"`
	Clusters   map[string]int        `json:"changes_per_cluster"`
	Filter     map[string]string     `json:"filter"`
	States     []string              `json:"-"`
	Fields     []string              `json:"-"`
	More       int                   `json:"-"` // changes the page does not list
	MoreYoung  int                   `json:"-"`
}

// filterFields are the query parameters / filters.
var filterFields = []string{"cluster", "backend", "testlist", "op", "state"}

func (d *dash) changes(r *http.Request) (*changesData, string, error) {
	f, _, stale, ver, err := d.currentVersion(r.Context())
	if err != nil {
		return nil, "", err
	}
	v := &changesData{Stale: stale, Series: f.Series, Stopped: f.Stopped, Unmeasured: f.Unmeasured, OddNodes: f.OddNodes, Clusters: map[string]int{},
		Filter: map[string]string{}, States: history.TriageStates, Fields: filterFields[:4], Changes: []history.Change{},
		Young: f.Young, Judged: f.Series - len(f.Young), Needs: changes.MinRef + 1}
	if v.Young == nil {
		v.Young = []history.YoungSeries{}
	}
	if f.Newest != nil {
		v.Newest = f.Newest.Name()
	}
	for _, k := range filterFields {
		if x := r.URL.Query().Get(k); x != "" {
			v.Filter[k] = x
		}
	}
	for _, c := range f.Changes {
		v.Clusters[c.Cluster]++
		have := map[string]string{"cluster": c.Cluster, "backend": c.Backend, "testlist": c.Testlist, "op": c.Op, "state": c.Triage}
		keep := true
		for k, want := range v.Filter {
			keep = keep && have[k] == want
		}
		if keep {
			v.Changes = append(v.Changes, c)
		}
	}
	return v, ver + "|" + r.URL.RawQuery, nil
}

// MostShown is how many changes the changes page lists (the worst first): a store of
// thousands of changes still opens at once; a filter, or /api/changes, gives the rest.
const MostShown = 200

func (d *dash) changesPage(w http.ResponseWriter, r *http.Request) {
	v, key, err := d.changes(r)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	if b, ok := d.cache.get("page|" + key); ok {
		writeHTML(w, b)
		return
	}
	if n := len(v.Changes); n > MostShown {
		v.Changes, v.More = v.Changes[:MostShown], n-MostShown
	}
	if n := len(v.Young); n > MostShown {
		v.Young, v.MoreYoung = v.Young[:MostShown], n-MostShown
	}
	b, err := d.page("changes", "Changes", v)
	if err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	d.cache.put("page|"+key, b)
	writeHTML(w, b)
}

func (d *dash) changesAPI(w http.ResponseWriter, r *http.Request) {
	v, _, err := d.changes(r)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, v)
}

func (d *dash) series(w http.ResponseWriter, r *http.Request) (*history.SeriesView, bool) {
	key := r.URL.Query().Get("key")
	if key == "" {
		fail(w, http.StatusBadRequest, errors.New("give the series: /series?key=KEY (the changes page links each)"))
		return nil, false
	}
	v, err := d.store().Series(r.Context(), key, history.DefaultLookback)
	if errors.Is(err, history.ErrNoSeries) {
		fail(w, http.StatusNotFound, fmt.Errorf("%s holds no series %q", d.where, key))
		return nil, false
	}
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return nil, false
	}
	return v, true
}

func (d *dash) seriesPage(w http.ResponseWriter, r *http.Request) {
	if v, ok := d.series(w, r); ok {
		d.render(w, "series", v.Key, struct {
			*history.SeriesView
			States []string
		}{v, history.TriageStates})
	}
}

func (d *dash) seriesAPI(w http.ResponseWriter, r *http.Request) {
	if v, ok := d.series(w, r); ok {
		writeJSON(w, v)
	}
}

func (d *dash) runsPage(w http.ResponseWriter, r *http.Request) {
	_, runs, _, err := d.current(r.Context())
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	d.render(w, "runs", "Runs", runs)
}

func (d *dash) runsAPI(w http.ResponseWriter, r *http.Request) {
	_, runs, _, err := d.current(r.Context())
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, struct {
		Runs []history.RunSummary `json:"runs"`
	}{runs})
}

// runData is a stored run and its cases; when several stored runs share the id asked
// for (one a cluster, or every local run of one id), Runs lists each, the newest
// MostRunsShown with their cases, and More counts the rest (each one link away).
type runData struct {
	Run   *history.RunSummary `json:"run,omitempty"`
	Cases []history.CasePoint `json:"cases"`
	Runs  []storedRun         `json:"runs_of_this_id,omitempty"`
	More  int                 `json:"more_runs_of_this_id,omitempty"`
	Shown int                 `json:"-"`
}

// storedRun is one of several stored runs of an id, with its cases.
type storedRun struct {
	Run   history.RunSummary  `json:"run"`
	Cases []history.CasePoint `json:"cases,omitempty"`
}

// MostRunsShown is how many stored runs of one id a run's page shows with their cases.
const MostRunsShown = 10

// pick is the stored run of run id id (and store id sid, when given): one, or the
// choices when several share the id.
func (d *dash) pick(ctx context.Context, id, sid string) (*history.RunSummary, []history.RunSummary, error) {
	_, runs, _, err := d.current(ctx)
	if err != nil {
		return nil, nil, err
	}
	var of []history.RunSummary
	for _, r := range runs {
		if r.RunID == id && (sid == "" || strconv.FormatInt(r.ID, 10) == sid) {
			of = append(of, r)
		}
	}
	switch len(of) {
	case 0:
		return nil, nil, errNotHeld
	case 1:
		return &of[0], nil, nil
	}
	return nil, of, nil
}

var errNotHeld = errors.New("the store holds no such run")

func (d *dash) run(w http.ResponseWriter, r *http.Request) (*runData, bool) {
	run, choices, err := d.pick(r.Context(), r.PathValue("id"), r.URL.Query().Get("sid"))
	switch {
	case errors.Is(err, errNotHeld):
		fail(w, http.StatusNotFound, fmt.Errorf("%s holds no run %q (/runs lists them)", d.where, r.PathValue("id")))
		return nil, false
	case err != nil:
		fail(w, http.StatusServiceUnavailable, err)
		return nil, false
	case run == nil:
		v := &runData{Cases: []history.CasePoint{}, Shown: MostRunsShown}
		for i, c := range choices {
			one := storedRun{Run: c}
			if i < MostRunsShown {
				if one.Cases, err = d.store().RunCases(r.Context(), c.ID); err != nil {
					fail(w, http.StatusServiceUnavailable, err)
					return nil, false
				}
			} else {
				v.More++
			}
			v.Runs = append(v.Runs, one)
		}
		return v, true
	}
	cases, err := d.store().RunCases(r.Context(), run.ID)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return nil, false
	}
	return &runData{Run: run, Cases: cases}, true
}

func (d *dash) runPage(w http.ResponseWriter, r *http.Request) {
	if v, ok := d.run(w, r); ok {
		d.render(w, "run", "Run "+r.PathValue("id"), v)
	}
}

func (d *dash) runAPI(w http.ResponseWriter, r *http.Request) {
	if v, ok := d.run(w, r); ok {
		writeJSON(w, v)
	}
}

// compareSides are the two stored runs a /compare request names, and the key its answer
// is kept by (compares): the store's state and the two runs' store ids — a stored run
// changes only by a later add, which changes the state.
func (d *dash) compareSides(w http.ResponseWriter, r *http.Request) ([2]*history.RunSummary, string, bool) {
	var sides [2]*history.RunSummary
	q := r.URL.Query()
	if q.Get("base") == "" || q.Get("new") == "" {
		fail(w, http.StatusBadRequest, errors.New("give two runs: /compare?base=RUN_ID&new=RUN_ID (sid picks one of several stored runs of an id: base_sid, new_sid)"))
		return sides, "", false
	}
	state, err := d.stateOf(r.Context())
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return sides, "", false
	}
	for i, side := range []string{"base", "new"} {
		run, choices, err := d.pick(r.Context(), q.Get(side), q.Get(side+"_sid"))
		if errors.Is(err, errNotHeld) {
			fail(w, http.StatusNotFound, fmt.Errorf("%s: %s holds no run %q", side, d.where, q.Get(side)))
			return sides, "", false
		}
		if err != nil {
			fail(w, http.StatusServiceUnavailable, err)
			return sides, "", false
		}
		if run == nil { // an id stored as several runs: the user chooses, opx never guesses
			var each []string
			for _, c := range choices[:min(len(choices), 20)] {
				each = append(each, fmt.Sprintf("%s_sid=%d (%s, attempt %d)", side, c.ID, c.At.UTC().Format("2006-01-02 15:04 UTC"), c.Attempt))
			}
			fail(w, http.StatusConflict, fmt.Errorf("%s: run id %q names %d stored runs: choose one with %s", side, q.Get(side), len(choices), strings.Join(each, "; ")))
			return sides, "", false
		}
		if sides[i] = run; i == 1 && sides[0].ID == run.ID {
			fail(w, http.StatusBadRequest, fmt.Errorf("base and new are the same stored run (%s, sid %d): a run compared with itself always passes; choose another", q.Get(side), run.ID))
			return sides, "", false
		}
	}
	return sides, fmt.Sprintf("%s|%d|%d", state, sides[0].ID, sides[1].ID), true
}

// comparison is two stored runs compared as opx compare compares two run directories.
// Both runs' cases are read at once (two of the store's connections), then joined.
func (d *dash) comparison(ctx context.Context, runs [2]*history.RunSummary) (*compare.Result, error) {
	var cases [2][]history.CasePoint
	var errs [2]error
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() { cases[i], errs[i] = d.store().RunCases(ctx, run.ID) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	var sides [2]*compare.Run
	for i, run := range runs {
		sides[i] = compare.FromRows(compare.Side{Dir: d.where, RunID: run.RunID, SourceSHA: run.SourceSHA, At: run.At.Format(time.RFC3339)},
			results.KeyFields, rowsOf(cases[i]), sides[0])
	}
	return compare.Join(sides[0], sides[1], compare.Options{Same: compare.DefaultOptions.Same, NoSpread: compare.DefaultOptions.NoSpread}), nil
}

// rowsOf are a stored run's cases as result rows (a case no attempt measured is left out,
// as it is from a run directory's rows): the headline metric and its spread.
func rowsOf(cases []history.CasePoint) []results.Row {
	out := make([]results.Row, 0, len(cases))
	for _, c := range cases {
		o, _ := verdict.ParseOutcome(c.Outcome)
		if o == verdict.Missing {
			continue // missing
		}
		status := o.Status()
		row := results.Row{Testlist: c.Testlist, OpType: c.Op, ArgsKey: c.Args, ArgsLabel: c.Label, Backend: c.Backend, Cluster: c.Cluster,
			WorldSize: c.WorldSize, Status: status, Metrics: map[string]float64{}, Runner: history.RunnerOf(c.Cluster)}
		if c.Value != nil {
			row.Metrics[c.Metric] = *c.Value
			row.MetricOrder = append(row.MetricOrder, c.Metric)
			if c.Lo != nil && c.Hi != nil {
				row.Metrics[c.Metric+"_min"], row.Metrics[c.Metric+"_max"] = *c.Lo, *c.Hi
				row.MetricOrder = append(row.MetricOrder, c.Metric+"_min", c.Metric+"_max")
			}
		}
		out = append(out, row)
	}
	return out
}

// compared is the comparison of the two stored runs, kept by key (compareSides): made
// once, by the first request that asks (a request that leaves does not end it: the others
// wait for it).
func (d *dash) compared(ctx context.Context, key string, runs [2]*history.RunSummary) (*compare.Result, error) {
	d.mu.Lock()
	e := d.results[key]
	if e == nil {
		if d.results == nil {
			d.results = map[string]*comparedEntry{}
		}
		for k, old := range d.results { // keep at most 2: let finished ones go, never one being made
			if len(d.results) < 2 {
				break
			}
			select {
			case <-old.done:
				delete(d.results, k)
			default:
			}
		}
		if len(d.results) >= 2 {
			d.mu.Unlock()
			return nil, errors.New("two other comparisons are being made: ask again in a few seconds")
		}
		e = &comparedEntry{done: make(chan struct{})}
		d.results[key] = e
		d.mu.Unlock()
		e.r, e.err = d.comparison(context.WithoutCancel(ctx), runs)
		if e.err != nil { // asked again, made again
			d.mu.Lock()
			if d.results[key] == e {
				delete(d.results, key)
			}
			d.mu.Unlock()
		}
		close(e.done)
	} else {
		d.mu.Unlock()
	}
	select {
	case <-e.done:
		return e.r, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// CompareWindow is how many cases /api/compare answers by default (the worst first), and
// MaxCompareWindow the most it answers at once short of limit=all: two runs of 128,000
// cases compared are about 110 MB of JSON, which twenty clients at once cannot be sent
// in page time.
const (
	CompareWindow    = 1000
	MaxCompareWindow = 10000
)

// window is the cases a /api/compare request asks for: ?offset= (0 by default) and
// ?limit= (CompareWindow by default, 1 to MaxCompareWindow, or all); all is -1.
func window(q url.Values) (offset, limit int, err error) {
	limit = CompareWindow
	switch l := q.Get("limit"); {
	case l == "all":
		limit = -1
	case l != "":
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > MaxCompareWindow {
			return 0, 0, fmt.Errorf("limit=%s: give 1 to %d cases at a time, or limit=all for every case", safe.Text(l), MaxCompareWindow)
		}
	}
	if o := q.Get("offset"); o != "" {
		if offset, err = strconv.Atoi(o); err != nil || offset < 0 {
			return 0, 0, fmt.Errorf("offset=%s: give the index of the first case to answer, 0 or more", safe.Text(o))
		}
	}
	return offset, limit, nil
}

func (d *dash) comparePage(w http.ResponseWriter, r *http.Request) {
	runs, key, ok := d.compareSides(w, r)
	if !ok {
		return
	}
	if b, ok := d.compares.get("page|" + key); ok {
		writeHTML(w, b)
		return
	}
	res, err := d.compared(r.Context(), key, runs)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	var md bytes.Buffer
	res.Markdown(&md)
	counts := slices.Sorted(maps.Keys(res.Counts))
	b, err := d.page("compare", "Compare", struct {
		Result   *compare.Result
		Cases    []compare.Case
		Counts   []string
		Markdown string
	}{res, res.Cases()[:min(res.Len(), 500)], counts, md.String()})
	if err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	d.compares.put("page|"+key, b)
	writeHTML(w, b)
}

func (d *dash) compareAPI(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := window(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	runs, key, ok := d.compareSides(w, r)
	if !ok {
		return
	}
	if b, ok := d.compares.get("api|" + key); ok && limit < 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	res, err := d.compared(r.Context(), key, runs)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if limit >= 0 { // a window of the cases, the worst first; the next one linked
		offset = min(offset, res.Len())
		if offset+limit < res.Len() {
			q := r.URL.Query()
			q.Set("offset", strconv.Itoa(offset+limit))
			q.Set("limit", strconv.Itoa(limit))
			w.Header().Set("Link", "<"+r.URL.Path+"?"+q.Encode()+`>; rel="next"`)
		}
		res.WriteJSONWindow(r.Context(), w, offset, offset+limit)
		return
	}
	var b bytes.Buffer
	if err := res.WriteJSON(r.Context(), &b); err != nil {
		return // the client left
	}
	d.compares.put("api|"+key, b.Bytes())
	w.Write(b.Bytes())
}

// anyChange is whether id is a change of any series (a check of every series, as opx
// history triage makes, kept while the store's runs stay as they are): the dashboard
// accepts triage of every change any of its pages shows.
func (d *dash) anyChange(ctx context.Context, id string) (bool, error) {
	state, err := d.stateOf(ctx)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	ids, ok := d.allIDs[state]
	d.mu.Unlock()
	if !ok {
		f, err := d.store().Check(ctx, history.CheckOptions{Options: changes.Defaults, All: true})
		if err != nil {
			return false, err
		}
		ids = map[string]bool{}
		for _, c := range f.Changes {
			ids[c.ID] = true
		}
		d.mu.Lock()
		d.allIDs = map[string]map[string]bool{state: ids} // only the newest state's
		d.mu.Unlock()
	}
	return ids[id], nil
}

// triage records a triage event from an authenticated request: {"state", "note", "link"}.
func (d *dash) triage(w http.ResponseWriter, r *http.Request, name string) {
	var req struct{ State, Note, Link string }
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("the body: a JSON object {\"state\", \"note\", \"link\"} of at most %d bytes: %w", MaxBody, err))
		return
	}
	if err := history.CheckTriage(req.State, req.Note, req.Link); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	f, _, _, err := d.current(r.Context())
	if err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	id := r.PathValue("id")
	known := false
	for _, c := range f.Changes {
		known = known || c.ID == id
	}
	if !known { // a change a series page shows that the newest run did not touch (another machine's)
		if known, err = d.anyChange(r.Context(), id); err != nil {
			fail(w, http.StatusServiceUnavailable, err)
			return
		}
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev, err := d.store().Triage(r.Context(), id, req.State, name, host, req.Note, req.Link, known)
	if err != nil {
		if !known {
			fail(w, http.StatusNotFound, err)
			return
		}
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, ev)
}
