package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkRE finds the target of a Markdown link or image: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchor is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, every character but letters, digits, '_' and '-' dropped.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownProse returns md without its fenced code blocks, and its headings'
// anchors.
func markdownProse(md string) (prose string, anchors map[string]bool) {
	anchors = map[string]bool{}
	var out strings.Builder
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "#") {
			anchors[headingAnchor(strings.TrimLeft(line, "#"))] = true
		}
		out.WriteString(line + "\n")
	}
	return out.String(), anchors
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file it names exists, and a #fragment names a heading of that file. The
// README's split into docs/ moved sections between files; a link left
// pointing at the old place fails here.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	readAnchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		md, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		_, a := markdownProse(string(md))
		anchorsOf[path] = a
		return a
	}
	links := 0
	for _, f := range files {
		path := filepath.Join(root, filepath.FromSlash(f))
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		prose, _ := markdownProse(string(md))
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %s does not exist", f, target, file)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !readAnchors(dest)[frag] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", f, target, frag, filepath.Base(dest))
			}
		}
	}
	if links < 20 {
		t.Fatalf("found only %d relative links in %v: is linkRE still right?", links, files)
	}
}

func TestHeadingAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"The privacy model in plain words":                            "the-privacy-model-in-plain-words",
		"Noise beyond Gaussian: which is cheapest":                    "noise-beyond-gaussian-which-is-cheapest",
		"dp_avgmix end to end":                                        "dp_avgmix-end-to-end",
		"The mechanisms, and where dpsql departs from the papers":     "the-mechanisms-and-where-dpsql-departs-from-the-papers",
		" Upgrading a version-0 file":                                 "upgrading-a-version-0-file",
		"Releases (write a new table)":                                "releases-write-a-new-table",
		"The sqlite3 shell, Python and DB Browser: the dp0 extension": "the-sqlite3-shell-python-and-db-browser-the-dp0-extension",
	} {
		if got := headingAnchor(h); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestReadmeIsAGettingStartedPage keeps README.md short, with the set-up
// commands (the demo and the test suite) on its first screen; the rest of the
// documentation lives in docs/.
func TestReadmeIsAGettingStartedPage(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(md), "\n"), "\n")
	if len(lines) > 400 {
		t.Errorf("README.md has %d lines; at most 400: move reference text into docs/", len(lines))
	}
	first := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, want := range []string{"go run ./cmd/dpsql demo", "go test ", "go test -short ./...", "go test ./..."} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md's first 40 lines lack %q", want)
		}
	}
}

// visitsCountRE finds a noisy count(*) of sensitivity 1 over visits, the
// quick start's table in which one person has several rows.
var visitsCountRE = regexp.MustCompile(`(?i)dp_gaussian\(\s*count\(\*\)\s*,\s*1\s*,[^)]*\)\s+FROM\s+visits\b`)

// TestDocExamplesCountPeople: the examples over visits (several rows per
// person) count people, as the quick start explains; count(*) with
// sensitivity 1 would understate what one person can change.
func TestDocExamplesCountPeople(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range visitsCountRE.FindAllString(string(md), -1) {
			t.Errorf("%s: %q: one person has several visits; count(DISTINCT patient) has sensitivity 1, count(*) does not", f, m)
		}
	}
}
