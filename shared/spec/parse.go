package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Parse decodes a spec written in JSON or YAML and validates it. Decoding
// is strict: unknown fields, duplicate keys and values of the wrong type
// are errors. The input must be UTF-8, at most MaxSpecBytes, and a single
// document; YAML anchors, aliases and merge keys are allowed. Every error
// Parse returns is a *ValidationError listing the problems found; for YAML
// input they carry source line numbers.
func Parse(data []byte) (job *Job, err error) {
	if len(data) > MaxSpecBytes {
		return nil, wholeSpecError(fmt.Sprintf("spec is %d bytes; at most %d are allowed", len(data), MaxSpecBytes), 0)
	}
	if !utf8.Valid(data) {
		return nil, wholeSpecError("spec is not valid UTF-8", invalidUTF8Line(data))
	}
	// The YAML library is third-party code fed untrusted input; a panic in
	// it must reach the submitter as a rejected spec, not crash the
	// control plane.
	defer func() {
		if r := recover(); r != nil {
			job, err = nil, wholeSpecError(fmt.Sprintf("spec could not be parsed: %v", r), 0)
		}
	}()

	root, fe := parseTree(data)
	if fe != nil {
		return nil, &ValidationError{Errors: []FieldError{*fe}}
	}
	d := decoder{lines: make(map[string]int), budget: maxNodes}
	j := new(Job)
	d.job(root, j)
	if len(d.errs) > 0 {
		// Validating a half-decoded job would add noise ("name: is
		// required" after "name: must be a string"), so stop here.
		return nil, d.errs.err()
	}
	errs := j.validate()
	for i := range errs {
		errs[i].Line = d.lineFor(errs[i].Field)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return j, nil
}

func wholeSpecError(msg string, line int) error {
	return &ValidationError{Errors: []FieldError{{Message: msg, Line: line}}}
}

func invalidUTF8Line(data []byte) int {
	line := 1
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			break
		}
		if r == '\n' {
			line++
		}
		data = data[n:]
	}
	return line
}

const (
	// maxNodes bounds the decoding work. Without aliases a spec within
	// MaxSpecBytes has fewer nodes than this; with aliases a small document
	// can expand enormously ("billion laughs"), and this stops it.
	maxNodes = 2 * MaxSpecBytes
	// maxMergeDepth bounds nested YAML merge keys, which may also refer to
	// themselves ("&a {<<: *a}").
	maxMergeDepth = 8
	// maxAliasChain bounds alias-to-alias hops defensively.
	maxAliasChain = 16
)

// parseTree turns the input into a node tree. JSON takes its own path
// because YAML is not quite a superset of it: yaml.v3 rejects JSON's "\/"
// and surrogate-pair escapes. JSON nodes carry no line numbers.
func parseTree(data []byte) (*yaml.Node, *FieldError) {
	if json.Valid(data) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		n, err := jsonNode(dec)
		if err != nil {
			return nil, &FieldError{Message: "syntax error: " + err.Error()}
		}
		if isNull(n) {
			return nil, &FieldError{Message: "spec is empty"}
		}
		return n, nil
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, &FieldError{Message: "spec is empty"}
	} else if err != nil {
		return nil, yamlSyntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &FieldError{Message: "spec must be a single YAML document", Line: extra.Line}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlSyntaxError(err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, &FieldError{Message: "spec is empty"}
	}
	return doc.Content[0], nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlSyntaxError(err error) *FieldError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{Message: "syntax error: " + m[2], Line: line}
	}
	return &FieldError{Message: "syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
}

// jsonNode reads one JSON value as a yaml.Node, so one decoder serves both
// formats. The input is known to be valid JSON.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if t == '[' {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				n.Content = append(n.Content, scalarNode("!!str", key))
			}
			v, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return scalarNode("!!str", t), nil
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return scalarNode("!!float", string(t)), nil
		}
		return scalarNode("!!int", string(t)), nil
	case bool:
		return scalarNode("!!bool", strconv.FormatBool(t)), nil
	default:
		return scalarNode("!!null", "null"), nil
	}
}

func scalarNode(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliasChain; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decoder fills a Job from a node tree, recording every type error, unknown
// field and duplicate key, and the source line of every field path so that
// validation errors found later can point into the file.
type decoder struct {
	errs   errorList
	lines  map[string]int
	budget int
}

func (d *decoder) fail(path string, n *yaml.Node, msg string) {
	d.errs = append(d.errs, FieldError{Field: path, Message: msg, Line: n.Line})
}

// deref resolves n and charges it against the node budget. It returns nil
// once the budget is spent; the error is reported once.
func (d *decoder) deref(n *yaml.Node, path string) *yaml.Node {
	if d.budget <= 0 {
		return nil
	}
	d.budget--
	if d.budget == 0 {
		d.fail(path, n, "spec is too complex: too many values once aliases are expanded")
		return nil
	}
	return resolve(n)
}

// lineFor returns the line of field path, or of its nearest enclosing field
// that has one (an omitted field has no line of its own).
func (d *decoder) lineFor(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

type pair struct {
	key  string
	line int
	val  *yaml.Node
}

// object decodes a mapping field by field. set stores one field and reports
// whether key names a known field. A null mapping leaves everything unset.
func (d *decoder) object(n *yaml.Node, path string, set func(key string, v *yaml.Node, path string) bool) {
	for _, p := range d.mapping(n, path) {
		fp := p.key
		if path != "" {
			fp = path + "." + p.key
		}
		d.lines[fp] = p.line
		if !set(p.key, p.val, fp) {
			d.errs = append(d.errs, FieldError{Field: fp, Message: "unknown field", Line: p.line})
		}
	}
}

// mapping returns the key/value pairs of a mapping node, with YAML merge
// keys ("<<: *defaults") expanded.
func (d *decoder) mapping(n *yaml.Node, path string) []pair {
	r := d.deref(n, path)
	if r == nil || isNull(r) {
		return nil
	}
	if r.Kind != yaml.MappingNode {
		if path == "" {
			d.fail(path, n, "a spec must be an object (a mapping of fields)")
		} else {
			d.fail(path, n, "must be an object")
		}
		return nil
	}
	return d.pairs(r, path, 0)
}

func (d *decoder) pairs(n *yaml.Node, path string, depth int) []pair {
	var own, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kr := d.deref(k, path)
		if kr == nil {
			return nil
		}
		switch {
		case kr.Kind == yaml.ScalarNode && kr.ShortTag() == "!!merge":
			merged = append(merged, d.merge(v, path, depth)...)
		case kr.Kind == yaml.ScalarNode:
			own = append(own, pair{key: kr.Value, line: k.Line, val: v})
		default:
			d.fail(path, k, "keys must be strings")
		}
	}
	// Explicit keys override merged ones, and earlier merge sources
	// override later ones, as the YAML merge-key convention specifies.
	seen := make(map[string]bool, len(own)+len(merged))
	out := make([]pair, 0, len(own)+len(merged))
	for _, p := range own {
		if seen[p.key] {
			fp := p.key
			if path != "" {
				fp = path + "." + p.key
			}
			d.errs = append(d.errs, FieldError{Field: fp, Message: "duplicate key", Line: p.line})
			continue
		}
		seen[p.key] = true
		out = append(out, p)
	}
	for _, p := range merged {
		if !seen[p.key] {
			seen[p.key] = true
			out = append(out, p)
		}
	}
	return out
}

// merge returns the pairs contributed by the value of a "<<" key: a mapping
// or a list of mappings.
func (d *decoder) merge(v *yaml.Node, path string, depth int) []pair {
	if depth >= maxMergeDepth {
		d.fail(path, v, "merge keys are nested too deeply")
		return nil
	}
	r := d.deref(v, path)
	if r == nil {
		return nil
	}
	srcs := []*yaml.Node{r}
	if r.Kind == yaml.SequenceNode {
		srcs = r.Content
	}
	var out []pair
	for _, src := range srcs {
		sr := d.deref(src, path)
		if sr == nil {
			return out
		}
		if sr.Kind != yaml.MappingNode {
			d.fail(path, src, "a merge key (<<) must refer to a mapping or a list of mappings")
			continue
		}
		out = append(out, d.pairs(sr, path, depth+1)...)
	}
	return out
}

// list calls each for every element of a sequence. A null list is empty.
func (d *decoder) list(n *yaml.Node, path string, each func(e *yaml.Node, path string)) {
	r := d.deref(n, path)
	if r == nil || isNull(r) {
		return
	}
	if r.Kind != yaml.SequenceNode {
		d.fail(path, n, "must be a list")
		return
	}
	for i, e := range r.Content {
		ep := path + "[" + strconv.Itoa(i) + "]"
		d.lines[ep] = e.Line
		each(e, ep)
	}
}

// scalar resolves n and checks that it is a scalar with one of the given
// tags. It returns nil for null (leave the field unset) and on error.
func (d *decoder) scalar(n *yaml.Node, path, msg string, tags ...string) *yaml.Node {
	r := d.deref(n, path)
	if r == nil || isNull(r) {
		return nil
	}
	if r.Kind == yaml.ScalarNode {
		tag := r.ShortTag()
		for _, t := range tags {
			if tag == t {
				return r
			}
		}
	}
	d.fail(path, n, msg)
	return nil
}

func (d *decoder) str(n *yaml.Node, path string) string {
	if r := d.scalar(n, path, "must be a string", "!!str"); r != nil {
		return r.Value
	}
	return ""
}

func (d *decoder) integer(n *yaml.Node, path string) int {
	r := d.scalar(n, path, "must be an integer", "!!int")
	if r == nil {
		return 0
	}
	var v int
	if err := r.Decode(&v); err != nil {
		d.fail(path, n, "integer is out of range")
	}
	return v
}

func (d *decoder) duration(n *yaml.Node, path string) Duration {
	r := d.scalar(n, path, errDuration.Error(), "!!str")
	if r == nil {
		return 0
	}
	v, err := ParseDuration(r.Value)
	if err != nil {
		d.fail(path, n, err.Error())
	}
	return v
}

func (d *decoder) size(n *yaml.Node, path string) Size {
	r := d.scalar(n, path, errSize.Error(), "!!str", "!!int")
	if r == nil {
		return 0
	}
	if r.ShortTag() == "!!int" {
		var v int64
		if err := r.Decode(&v); err != nil {
			d.fail(path, n, "integer is out of range")
		}
		return Size(v)
	}
	v, err := ParseSize(r.Value)
	if err != nil {
		d.fail(path, n, err.Error())
	}
	return v
}

func (d *decoder) job(n *yaml.Node, j *Job) {
	d.object(n, "", func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "name":
			j.Name = d.str(v, p)
		case "stages":
			d.list(v, p, func(e *yaml.Node, p string) {
				var s Stage
				d.stage(e, p, &s)
				j.Stages = append(j.Stages, s)
			})
		case "retry":
			j.Retry = d.retry(v, p)
		case "lease":
			j.Lease = d.duration(v, p)
		case "priority":
			j.Priority = Priority(d.str(v, p))
		case "deadline":
			j.Deadline = d.duration(v, p)
		case "maxConcurrency":
			j.MaxConcurrency = d.integer(v, p)
		case "output":
			j.Output = d.str(v, p)
		case "params":
			j.Params = d.runParams(v, p) // params.go
		default:
			return false
		}
		return true
	})
}

func (d *decoder) stage(n *yaml.Node, path string, s *Stage) {
	d.object(n, path, func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "name":
			s.Name = d.str(v, p)
		case "task":
			s.Task = d.str(v, p)
		case "exec":
			// An empty list stays non-nil, so validation can tell
			// "exec: []" from no exec at all.
			s.Exec = []string{}
			d.list(v, p, func(e *yaml.Node, p string) {
				s.Exec = append(s.Exec, d.str(e, p))
			})
		case "lambda":
			s.Lambda = d.str(v, p)
		case "after":
			d.list(v, p, func(e *yaml.Node, p string) {
				s.After = append(s.After, d.str(e, p))
			})
		case "partitions":
			s.Partitions = d.partitions(v, p)
		case "shuffle":
			if !isNull(v) {
				s.Shuffle = new(Shuffle)
				d.object(v, p, func(key string, v *yaml.Node, p string) bool {
					switch key {
					case "partitions":
						s.Shuffle.Partitions = d.integer(v, p)
					case "by":
						s.Shuffle.By = d.str(v, p)
					default:
						return false
					}
					return true
				})
			}
		case "retry":
			s.Retry = d.retry(v, p)
		case "lease":
			s.Lease = d.duration(v, p)
		case "priority":
			s.Priority = Priority(d.str(v, p))
		case "output":
			s.Output = d.stageOutput(v, p) // stageoutput.go
		case "skew":
			s.Skew = d.skew(v, p) // skew.go
		default:
			return d.toleranceKey(key, v, p, s) // tolerance.go
		}
		return true
	})
}

func (d *decoder) partitions(n *yaml.Node, path string) *Partitions {
	if isNull(n) {
		return nil
	}
	p := new(Partitions)
	d.object(n, path, func(key string, v *yaml.Node, fp string) bool {
		switch key {
		case "count":
			p.Count = d.integer(v, fp)
		case "params":
			d.list(v, fp, func(e *yaml.Node, ep string) {
				p.Params = append(p.Params, d.params(e, ep))
			})
		case "input":
			if !isNull(v) {
				p.Input = d.input(v, fp)
			}
		case "inputs":
			if !isNull(v) {
				p.Inputs = []Input{} // present but empty is an error
			}
			d.list(v, fp, func(e *yaml.Node, ep string) {
				in := d.input(e, ep)
				if in == nil {
					in = new(Input)
				}
				p.Inputs = append(p.Inputs, *in)
			})
		default:
			return false
		}
		return true
	})
	return p
}

// input decodes one input prefix of partitions.input or .inputs.
func (d *decoder) input(n *yaml.Node, path string) *Input {
	if isNull(n) {
		return nil
	}
	in := new(Input)
	d.object(n, path, func(key string, v *yaml.Node, fp string) bool {
		switch key {
		case "name":
			in.Name = d.str(v, fp)
		case "prefix":
			in.Prefix = d.str(v, fp)
		case "splitSize":
			in.SplitSize = d.size(v, fp)
		case "format":
			in.Format = d.str(v, fp)
		case "columns":
			if !isNull(v) {
				in.Columns = []string{} // present but empty is an error, not "all"
			}
			d.list(v, fp, func(e *yaml.Node, ep string) {
				in.Columns = append(in.Columns, d.str(e, ep))
			})
		case "dynamicSplit":
			in.DynamicSplit = d.boolean(v, fp)
		case "allowEmpty":
			in.AllowEmpty = d.boolean(v, fp)
		default:
			return false
		}
		return true
	})
	return in
}

// params decodes one partition's parameters. Values must be strings, as in
// JSON; a YAML "shard: 3" needs quotes.
func (d *decoder) params(n *yaml.Node, path string) map[string]string {
	if isNull(n) {
		return nil
	}
	m := make(map[string]string)
	for _, p := range d.mapping(n, path) {
		m[p.key] = d.str(p.val, path+"."+p.key)
	}
	return m
}

func (d *decoder) retry(n *yaml.Node, path string) *Retry {
	if isNull(n) {
		return nil
	}
	r := new(Retry)
	d.object(n, path, func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "maxAttempts":
			r.MaxAttempts = d.integer(v, p)
		case "backoff":
			r.Backoff = d.duration(v, p)
		default:
			return false
		}
		return true
	})
	return r
}
