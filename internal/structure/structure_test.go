package structure

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	module = "github.com/batchwork/batchwork"
	// maxPackageLines bounds a package's non-test Go source.
	maxPackageLines = 3000
	// maxMethods bounds the methods a type declares. A facade that embeds
	// its capabilities promotes theirs; only the declared ones count.
	maxMethods = 40
)

// The DynamoDB adapter is the one exception to both bounds: its
// transactions span entities, so it stays one package, and its store type
// answers every port. Its methods are named by entity instead
// (TestStoreMethodsAreNamedByEntity).
var (
	largePackages = map[string]bool{"shared/dynamo": true}
	largeTypes    = map[string]bool{"shared/dynamo.Store": true}
)

type pkg struct {
	dir     string // relative to the repository root
	lines   int
	methods map[string]int // receiver type → declared methods
	imports map[string]bool
	names   map[string][]string // receiver type → method names
}

func load(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "cdk.out" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		p := pkgs[rel]
		if p == nil {
			p = &pkg{dir: rel, methods: map[string]int{}, imports: map[string]bool{}, names: map[string][]string{}}
			pkgs[rel] = p
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p.lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(ip, module+"/"); ok {
				p.imports[rest] = true
			}
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			recv := fd.Recv.List[0].Type
			if st, ok := recv.(*ast.StarExpr); ok {
				recv = st.X
			}
			if ix, ok := recv.(*ast.IndexExpr); ok {
				recv = ix.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				p.methods[id.Name]++
				p.names[id.Name] = append(p.names[id.Name], fd.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages under %s; the walk is broken", len(pkgs), root)
	}
	return pkgs
}

func TestNoPackageIsTooLarge(t *testing.T) {
	for _, p := range load(t) {
		if p.lines > maxPackageLines && !largePackages[p.dir] {
			t.Errorf("%s: %d lines of non-test Go, over %d: split it by capability", p.dir, p.lines, maxPackageLines)
		}
	}
}

func TestNoTypeHasTooManyMethods(t *testing.T) {
	for _, p := range load(t) {
		for typ, n := range p.methods {
			if n > maxMethods && !largeTypes[p.dir+"."+typ] {
				t.Errorf("%s.%s declares %d methods, over %d", p.dir, typ, n, maxMethods)
			}
		}
	}
}

// The control plane's packages stand on each other in one order: each
// imports only packages earlier in it, so a capability never reaches up
// into one built on it.
func TestControlPlaneImportsRunOneWay(t *testing.T) {
	order := [][]string{
		{"shared/control/jobid", "shared/control/page"},
		{"shared/control/kernel"},
		{"shared/control/readside", "shared/control/schedules", "shared/control/stages"},
		{"shared/control/tasks"},
		{"shared/control/admission"},
		{"shared/control/operations"},
		{"shared/control/sweep"},
		{"shared/control"},
	}
	rank := map[string]int{}
	for i, level := range order {
		for _, d := range level {
			rank[d] = i
		}
	}
	pkgs := load(t)
	for dir, p := range pkgs {
		if !strings.HasPrefix(dir, "shared/control") || dir == "shared/control/storetest" {
			continue
		}
		r, ok := rank[dir]
		if !ok {
			t.Errorf("%s: a control-plane package with no place in the import order; add it to this test", dir)
			continue
		}
		for im := range p.imports {
			if ir, ok := rank[im]; ok && ir >= r {
				t.Errorf("%s imports %s, which stands at the same level or above it", dir, im)
			}
		}
	}
	for _, level := range order {
		for _, d := range level {
			if pkgs[d] == nil {
				t.Errorf("%s: in the import order but not in the repository", d)
			}
		}
	}
}

// The store's methods read as entity then verb (river's JobInsert,
// QueueGet), so its 100 methods sort into their entities.
func TestStoreMethodsAreNamedByEntity(t *testing.T) {
	entities := []string{"Job", "Stage", "Shard", "Task", "Copy", "Attempt", "Timeline", "Due", "Slot",
		"Executor", "Schedule", "Catalog", "Outbox", "Owner"}
	p := load(t)["shared/dynamo"]
	if p == nil {
		t.Fatal("shared/dynamo not found")
	}
	names := p.names["Store"]
	sort.Strings(names)
	exported := 0
	for _, m := range names {
		if !ast.IsExported(m) {
			continue
		}
		exported++
		ok := false
		for _, e := range entities {
			ok = ok || strings.HasPrefix(m, e)
		}
		if !ok {
			t.Errorf("dynamo.Store.%s: not named after its entity (%s)", m, strings.Join(entities, ", "))
		}
	}
	if exported < 50 {
		t.Fatalf("dynamo.Store has %d exported methods; the parse is broken", exported)
	}
}
