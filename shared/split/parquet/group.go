package parquet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// group reads one row group's rows: each leaf column's values in turn
// per row, assembled back into the row's tree by their levels (Dremel's
// record assembly).
type group struct {
	top    []*pq.Column
	leaves []*leaf
	left   int64 // rows not yet read
}

// step is one node on the path from a top-level column to a leaf.
type step struct {
	child  int  // the node's index among its parent's children
	def    int  // the definition level at which the node is present
	rep    bool // the node is repeated: its value is a list
	leaf   bool
	fields int // a group's number of children
}

// leaf reads one leaf column of the row group.
type leaf struct {
	path  []step
	conv  func(pq.Value) ([]byte, error)
	pages pq.Pages
	vr    pq.ValueReader // the current page's values; nil between pages
	page  pq.Page
	buf   []pq.Value
	i, n  int
	eof   bool
	idx   []int // per repeated node on the path, the element being filled
}

// Intermediate row tree: an *obj per group, a *list per repeated node,
// a leaf's JSON text, nil for null.
type (
	obj  struct{ f []any }
	list struct{ e []any }
)

func newGroup(g pq.RowGroup, top []*pq.Column) (*group, error) {
	gr := &group{top: top, left: g.NumRows()}
	chunks := g.ColumnChunks()
	var walk func(c *pq.Column, child int, path []step) error
	walk = func(c *pq.Column, child int, path []step) error {
		s := step{child: child, def: c.MaxDefinitionLevel(), rep: c.Repeated(), leaf: c.Leaf(), fields: len(c.Columns())}
		path = append(path[:len(path):len(path)], s)
		if c.Leaf() {
			conv, err := converter(c)
			if err != nil {
				return err
			}
			reps := 0
			for _, p := range path {
				if p.rep {
					reps++
				}
			}
			gr.leaves = append(gr.leaves, &leaf{path: path, conv: conv, pages: chunks[c.Index()].Pages(), buf: make([]pq.Value, 512), idx: make([]int, reps)})
			return nil
		}
		for k, cc := range c.Columns() {
			if err := walk(cc, k, path); err != nil {
				return err
			}
		}
		return nil
	}
	for i, c := range top {
		if err := walk(c, i, nil); err != nil {
			gr.close()
			return nil, err
		}
	}
	return gr, nil
}

// row appends the next row to out, and reports false when there is none.
func (g *group) row(out *bytes.Buffer) (bool, error) {
	if g.left <= 0 {
		return false, nil
	}
	g.left--
	rec := &obj{f: make([]any, len(g.top))}
	for _, l := range g.leaves {
		if err := l.row(rec); err != nil {
			return false, err
		}
	}
	out.WriteByte('{')
	for i, c := range g.top {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, c.Name())
		out.WriteByte(':')
		render(out, c, rec.f[i])
	}
	out.WriteString("}\n")
	return true, nil
}

func (g *group) close() {
	for _, l := range g.leaves {
		l.close()
	}
	g.leaves = nil
}

// peek returns the next value without taking it; ok is false at the end
// of the column chunk.
func (l *leaf) peek() (v pq.Value, ok bool, err error) {
	for l.i == l.n {
		if l.eof {
			return v, false, nil
		}
		if l.vr == nil {
			p, err := l.pages.ReadPage()
			if errors.Is(err, io.EOF) {
				l.eof = true
				continue
			}
			if err != nil {
				return v, false, err
			}
			l.page, l.vr = p, p.Values()
		}
		n, err := l.vr.ReadValues(l.buf)
		l.i, l.n = 0, n
		if errors.Is(err, io.EOF) {
			pq.Release(l.page)
			l.page, l.vr = nil, nil
		} else if err != nil {
			return v, false, err
		}
	}
	return l.buf[l.i], true, nil
}

// row places the leaf's values of the next row into rec: the first value
// starts the row (repetition level 0), and the values after it up to the
// next such one belong to it.
func (l *leaf) row(rec *obj) error {
	for first := true; ; first = false {
		v, ok, err := l.peek()
		if err != nil {
			return err
		}
		if !ok || (!first && v.RepetitionLevel() == 0) {
			if first {
				return errors.New("a column chunk has fewer rows than its row group")
			}
			return nil
		}
		if first && v.RepetitionLevel() != 0 {
			return errors.New("a row starts with a repeated value")
		}
		l.i++
		if err := l.place(rec, v); err != nil {
			return err
		}
	}
}

// place puts value v where its levels say: its repetition level names the
// repeated node that gains an element (those below it start over), its
// definition level how deep the path is present.
func (l *leaf) place(rec *obj, v pq.Value) error {
	r, d := v.RepetitionLevel(), v.DefinitionLevel()
	if r > len(l.idx) {
		return fmt.Errorf("repetition level %d is above the column's %d", r, len(l.idx))
	}
	if r > 0 {
		l.idx[r-1]++
	}
	for k := r; k < len(l.idx); k++ {
		l.idx[k] = 0
	}
	cur, rep := rec, 0
	for _, s := range l.path {
		slot := &cur.f[s.child]
		if d < s.def { // absent here: null, or an empty list
			if s.rep && *slot == nil {
				*slot = &list{}
			}
			return nil
		}
		if s.rep {
			if *slot == nil {
				*slot = &list{}
			}
			ls := (*slot).(*list)
			e := l.idx[rep]
			rep++
			switch {
			case e == len(ls.e):
				ls.e = append(ls.e, nil)
			case e > len(ls.e):
				return errors.New("a repeated value skips an element")
			}
			slot = &ls.e[e]
		}
		if s.leaf {
			text, err := l.conv(v)
			if err != nil {
				return err
			}
			*slot = text
			return nil
		}
		if *slot == nil {
			*slot = &obj{f: make([]any, s.fields)}
		}
		cur = (*slot).(*obj)
	}
	return nil
}

func (l *leaf) close() {
	if l.page != nil {
		pq.Release(l.page)
		l.page, l.vr = nil, nil
	}
	l.pages.Close()
}

// render writes column c's value v. A repeated column's value is a list.
func render(out *bytes.Buffer, c *pq.Column, v any) {
	if !c.Repeated() {
		renderOne(out, c, v)
		return
	}
	out.WriteByte('[')
	if ls, ok := v.(*list); ok {
		for i, e := range ls.e {
			if i > 0 {
				out.WriteByte(',')
			}
			renderOne(out, c, e)
		}
	}
	out.WriteByte(']')
}

// renderOne writes one value of column c: a LIST group as an array of its
// elements, a MAP group as an object, another group as an object of its
// fields.
func renderOne(out *bytes.Buffer, c *pq.Column, v any) {
	switch {
	case v == nil:
		out.WriteString("null")
		return
	case c.Leaf():
		out.Write(v.([]byte))
		return
	}
	o := v.(*obj)
	kids := c.Columns()
	switch logical(c).(type) {
	case *format.ListType:
		if len(kids) == 1 && kids[0].Repeated() {
			renderList(out, c, kids[0], o.f[0])
			return
		}
	case *format.MapType:
		if len(kids) == 1 && kids[0].Repeated() && len(kids[0].Columns()) >= 1 {
			renderMap(out, kids[0], o.f[0])
			return
		}
	}
	out.WriteByte('{')
	for i, k := range kids {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, k.Name())
		out.WriteByte(':')
		render(out, k, o.f[i])
	}
	out.WriteByte('}')
}

// renderList writes a LIST: its repeated child rep holds the elements,
// wrapped in a one-field group unless the file uses one of the legacy
// layouts where the repeated node is the element itself.
func renderList(out *bytes.Buffer, c, rep *pq.Column, v any) {
	wrapped := !rep.Leaf() && len(rep.Columns()) == 1 &&
		rep.Name() != "array" && rep.Name() != c.Name()+"_tuple"
	out.WriteByte('[')
	if ls, ok := v.(*list); ok {
		for i, e := range ls.e {
			if i > 0 {
				out.WriteByte(',')
			}
			if wrapped {
				var inner any
				if e != nil {
					inner = e.(*obj).f[0]
				}
				render(out, rep.Columns()[0], inner)
			} else {
				renderOne(out, rep, e)
			}
		}
	}
	out.WriteByte(']')
}

// renderMap writes a MAP as an object: a key that is a JSON string is the
// member's name, another key its JSON text.
func renderMap(out *bytes.Buffer, kv *pq.Column, v any) {
	kids := kv.Columns()
	out.WriteByte('{')
	if ls, ok := v.(*list); ok {
		for i, e := range ls.e {
			if i > 0 {
				out.WriteByte(',')
			}
			pair := e.(*obj)
			switch key, _ := pair.f[0].([]byte); {
			case len(key) > 0 && key[0] == '"':
				out.Write(key)
			case key == nil:
				out.WriteString(`"null"`)
			default:
				writeString(out, string(key))
			}
			out.WriteByte(':')
			if len(kids) > 1 {
				render(out, kids[1], pair.f[1])
			} else {
				out.WriteString("null")
			}
		}
	}
	out.WriteByte('}')
}

// logical is a column's logical type, nil when it has none.
func logical(c *pq.Column) format.LogicalTypeValue {
	if lt := c.Type().LogicalType(); lt != nil {
		return lt.Value
	}
	return nil
}

func writeString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	out.Write(b)
}
