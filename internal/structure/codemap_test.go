package structure

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The code maps (README.md's short table and docs/code-map.md) name a file
// and then what in it implements a concept. When code moves and a map
// does not, a newcomer is sent to a file that no longer holds the thing:
// every path named must exist, and every name after a Go file must occur
// in that file.
func TestCodeMapsNameWhatExists(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
	for _, doc := range []string{"README.md", "docs/code-map.md"} {
		raw, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		rows, checked := 0, 0
		inMap := doc != "README.md"
		for _, line := range strings.Split(string(raw), "\n") {
			if doc == "README.md" {
				if strings.HasPrefix(line, "## ") {
					inMap = line == "## Code map"
				}
			}
			if !inMap || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| concept") {
				continue
			}
			cells := strings.Split(line, " | ")
			if len(cells) < 2 {
				continue
			}
			rows++
			where := cells[1]
			for _, seg := range strings.Split(where, ";") {
				var file, dir string
				for _, m := range tick.FindAllStringSubmatch(seg, -1) {
					tok := m[1]
					switch {
					case strings.HasSuffix(tok, ".go") && strings.Contains(tok, "/"):
						file, dir = tok, filepath.Dir(tok)
					case strings.HasSuffix(tok, ".go") && dir != "":
						file = filepath.Join(dir, tok)
					case strings.Contains(tok, "/") && !strings.ContainsAny(tok, " ("):
						p := strings.TrimSuffix(tok, "/")
						if _, err := os.Stat(filepath.Join(root, p)); err != nil {
							t.Errorf("%s: %q names %s, which does not exist", doc, cells[0], p)
						}
						file, dir = "", p
						continue
					case file != "" && ident.MatchString(tok):
						src, err := os.ReadFile(filepath.Join(root, file))
						if err != nil {
							t.Errorf("%s: %q names %s, which does not exist", doc, cells[0], file)
							file = ""
							continue
						}
						for _, part := range strings.Split(tok, ".") {
							if !regexp.MustCompile(`\b` + part + `\b`).Match(src) {
								t.Errorf("%s: %q names %s in %s, which does not hold it", doc, cells[0], tok, file)
							}
						}
						checked++
						continue
					default:
						continue
					}
					if _, err := os.Stat(filepath.Join(root, file)); err != nil {
						t.Errorf("%s: %q names %s, which does not exist", doc, cells[0], file)
						file = ""
					}
				}
			}
		}
		if rows < 8 || checked < 8 {
			t.Errorf("%s: read %d rows and checked %d names; the table's format changed and this test reads nothing", doc, rows, checked)
		}
	}
}
