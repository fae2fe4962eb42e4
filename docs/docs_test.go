package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines keeps README.md a front door; the details live in docs/.
const readmeMaxLines = 300

// repoRoot is the module root: this package lives one directory below it.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines; want at most %d (move details to docs/)", n, readmeMaxLines)
	}
}

// TestLinksResolve checks every relative link of every Markdown file in the
// repository: the file (or directory) it names exists, and its #anchor, if
// any, is a heading (GitHub's slug) or an explicit id of the target page.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages := markdownFiles(t, root)
	if len(pages) == 0 {
		t.Fatal("no Markdown files found")
	}
	anchors := map[string]map[string]bool{} // absolute path -> anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := pageAnchors(string(b))
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, l := range pageLinks(string(b)) {
			target, frag, _ := strings.Cut(l.target, "#")
			if target == "" && frag == "" {
				continue
			}
			dest := page
			if target != "" {
				p, err := url.PathUnescape(target)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
					continue
				}
				if strings.HasPrefix(p, "/") {
					dest = filepath.Join(root, filepath.FromSlash(p))
				} else {
					dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(p))
				}
				if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", rel, l.line, l.target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: no such file in the repository", rel, l.line, l.target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				// GitHub's line anchor of a source file: #L10 or #L10-L20.
				if msg := checkLineAnchor(dest, frag); msg != "" {
					t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, msg)
				}
				continue
			}
			if !anchorsOf(dest)[frag] {
				t.Errorf("%s:%d: link %q: no heading or id %q in %s", rel, l.line, l.target, frag, filepath.Base(dest))
			}
		}
	}
}

var lineAnchor = regexp.MustCompile(`^L([0-9]+)(?:-L([0-9]+))?$`)

// checkLineAnchor says what is wrong with frag as a line anchor of the
// file at path, or "" when it names lines the file has.
func checkLineAnchor(path, frag string) string {
	m := lineAnchor.FindStringSubmatch(frag)
	if m == nil {
		return fmt.Sprintf("anchor %q of a non-Markdown file is not a line anchor (#L10, #L10-L20)", frag)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Count(string(b), "\n")
	if len(b) > 0 && !strings.HasSuffix(string(b), "\n") {
		lines++
	}
	for _, g := range m[1:] {
		if n, _ := strconv.Atoi(g); g != "" && (n < 1 || n > lines) {
			return fmt.Sprintf("line %d is past the end of %s (%d lines)", n, filepath.Base(path), lines)
		}
	}
	return ""
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "results", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	htmlID     = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// pageLinks returns the relative link targets of a Markdown page, outside
// fenced code blocks and inline code.
func pageLinks(md string) []link {
	var out []link
	forEachLine(md, func(n int, line string) {
		line = inlineCode.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if schemeRE.MatchString(tg) || strings.HasPrefix(tg, "//") {
				continue // absolute URL
			}
			out = append(out, link{target: tg, line: n})
		}
	})
	return out
}

// pageAnchors returns the anchors GitHub gives a page: one slug per
// heading, with -1, -2 ... for repeats, and explicit <a id> / <a name>.
func pageAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	forEachLine(md, func(_ int, line string) {
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 || !strings.HasPrefix(trimmed, "#") {
			return
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		rest := trimmed[level:]
		if level > 6 || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			return
		}
		rest = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(rest), "#"))
		s := Slug(rest)
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			out[fmt.Sprintf("%s-%d", s, n+1)] = true
			return
		}
		seen[s] = 0
		out[s] = true
	})
	return out
}

var (
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text: link targets and tags
// dropped, lower case, every character but letters, digits, '_', '-' and
// spaces removed, spaces turned into '-'.
func Slug(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// forEachLine calls f with each line outside fenced code blocks, numbered
// from 1.
func forEachLine(md string, f func(n int, line string)) {
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		f(n, line)
	}
}

var (
	citedTest = regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)")
	goFunc    = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
)

// TestCitedTestsExist checks that every test, benchmark or fuzz target a
// page names in code spans (`TestX`) is a function of some _test.go file,
// so a rename cannot leave a page citing a test that no longer exists.
func TestCitedTestsExist(t *testing.T) {
	root := repoRoot(t)
	defined := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range goFunc.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range markdownFiles(t, root) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range citedTest.FindAllStringSubmatch(line, -1) {
				name := strings.SplitN(m[1], "/", 2)[0]
				if !defined[name] {
					t.Errorf("%s:%d: cites %s, which no _test.go file defines", rel, n+1, name)
				}
			}
		}
	}
}
