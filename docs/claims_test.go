package docs

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

// missingTest matches a page's claim that a test does not exist yet.
var missingTest = regexp.MustCompile(`(?i)\b(?:still to come|yet to be (?:written|tested)|not (?:yet )?tested|untested|no test (?:yet|covers)|tests? (?:is|are) (?:still )?missing|without a test|has no test|TODO)\b`)

// TestNoPageClaimsAMissingTest: no page says a test is still to come. A
// promise is held by a named test (TestCitedTestsExist checks the name),
// or the page does not make it.
func TestNoPageClaimsAMissingTest(t *testing.T) {
	root := repoRoot(t)
	for _, page := range markdownFiles(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		forEachLine(string(b), func(n int, line string) {
			if m := missingTest.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: name the test that holds it, or drop the claim", rel, n, m)
			}
		})
	}
}

// ratioRows are the rows of docs/performance.md's results table that other
// pages quote, by the words a page quotes them with.
var ratioRows = map[string]string{
	"per-request lock": "locked / per-request, orders/s @1000",
	"per-request":      "locked / per-request, orders/s @1000",
	"lockless":         "locked / conditional, orders/s @1000",
	"conditional":      "locked / conditional, orders/s @1000",
}

// ratioClaim is "about 200× the per-request lock", "7–8× the lockless
// designs", "6.7× conditional".
var ratioClaim = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)(?:\s*[–-]\s*(\d[\d,]*(?:\.\d+)?))?×\s+(?:the\s+|that of the\s+)?(per-request lock|per-request|lockless|conditional)`)

// TestFiguresAgreeWithPerformance: a page that quotes how many times the
// lockless or the per-request designs the service sells quotes what
// docs/performance.md measured: each number, rounded to the precision it
// is written with, lies within the runs of its row.
func TestFiguresAgreeWithPerformance(t *testing.T) {
	root := repoRoot(t)
	perf, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	measured := map[string][2]float64{} // row -> min, max of its runs
	for line := range strings.Lines(string(perf)) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 {
			continue
		}
		row := strings.TrimSpace(cells[0])
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, c := range cells[1:] {
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(c), "×"), 64)
			if err != nil || !strings.HasSuffix(strings.TrimSpace(c), "×") {
				continue
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo <= hi {
			measured[row] = [2]float64{lo, hi}
		}
	}
	for _, row := range ratioRows {
		if _, ok := measured[row]; !ok {
			t.Fatalf("docs/performance.md has no results row %q: has the table changed?", row)
		}
	}
	claims := 0
	for _, page := range markdownFiles(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		forEachLine(string(b), func(n int, line string) {
			for _, m := range ratioClaim.FindAllStringSubmatch(line, -1) {
				claims++
				r := measured[ratioRows[m[3]]]
				for _, num := range m[1:3] {
					if num != "" && !withinAtPrecision(num, r[0], r[1]) {
						t.Errorf("%s:%d: %q: docs/performance.md measured %v–%v× (%s)", rel, n, m[0], r[0], r[1], ratioRows[m[3]])
					}
				}
			}
		})
	}
	if claims == 0 {
		t.Error("no page quotes a ratio to the lockless or per-request designs: has the wording changed?")
	}
}

// withinAtPrecision reports whether the number written as num lies in
// [lo, hi] once lo and hi are rounded to num's precision: its decimals,
// or for a whole number its significant digits ("200" is hundreds).
func withinAtPrecision(num string, lo, hi float64) bool {
	num = strings.ReplaceAll(num, ",", "")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return false
	}
	unit := 1.0
	if i := strings.IndexByte(num, '.'); i >= 0 {
		unit = math.Pow(10, -float64(len(num)-i-1))
	} else {
		for s := num; len(s) > 1 && strings.HasSuffix(s, "0"); s = s[:len(s)-1] {
			unit *= 10
		}
	}
	round := func(x float64) float64 { return math.Round(x/unit) * unit }
	const eps = 1e-9
	return v >= round(lo)-eps && v <= round(hi)+eps
}

func TestWithinAtPrecision(t *testing.T) {
	for _, tc := range []struct {
		num    string
		lo, hi float64
		want   bool
	}{
		{"7", 6.66, 6.81, true}, {"8", 6.66, 6.81, false}, {"6.7", 6.66, 6.81, true}, {"6.9", 6.66, 6.81, false},
		{"200", 203, 218, true}, {"212", 203, 218, true}, {"230", 203, 218, false}, {"6.66", 6.66, 6.81, true},
	} {
		if got := withinAtPrecision(tc.num, tc.lo, tc.hi); got != tc.want {
			t.Errorf("withinAtPrecision(%s, %v, %v) = %v; want %v", tc.num, tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestReadmeNamesEveryEnvException: the README's rule for a setting's
// variable (SECKILL_ and its key in capitals) names every setting that
// does not follow it.
func TestReadmeNamesEveryEnvException(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ") // a name may wrap
	for _, s := range config.Settings() {
		rule := "SECKILL_" + strings.ToUpper(strings.ReplaceAll(s.Key, ".", "_"))
		if s.Env != rule && !strings.Contains(readme, fmt.Sprintf("`%s` (`%s`)", s.Env, s.Key)) {
			t.Errorf("README.md: %s is read from %s, not %s: name it among the exceptions as `%s` (`%s`)", s.Key, s.Env, rule, s.Env, s.Key)
		}
	}
}
