package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/join"
	sortex "github.com/batchwork/batchwork/examples/sort"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

// specSchema is the document's job spec schema, which POST /jobs and
// POST /schedules declare as their body.
func specSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	d, _ := loadDoc(t)
	ref := d.Components.Schemas["JobSpec"]
	if ref == nil || ref.Value == nil {
		t.Fatal("openapi.yaml has no components.schemas.JobSpec")
	}
	return ref.Value
}

// specJSON turns a spec as a user writes it (JSON or YAML) into the JSON
// value a schema validator sees. YAML scalars take the types yaml.v3
// resolves, the resolution shared/spec's parser decides types by, and
// merge keys are expanded as the parser expands them.
func specJSON(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatalf("spec is not YAML: %v\n%s", err, src)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("spec has no JSON form: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// everyField sets every field of the spec, so the schema is held to all of
// them at once; its values are the forms docs/job-spec.md teaches.
const everyField = `
name: nightly-report
priority: high
lease: 2m
deadline: 6h
maxConcurrency: 50
output: outputs:reports/2026-11-29/
retry: {maxAttempts: 5, backoff: 1.5s}
stages:
  - name: extract
    exec: [extract.py, --since, "2026-11-01"]
    partitions:
      input: {prefix: "inputs:orders/", format: csv, splitSize: 16MiB, dynamicSplit: true}
    shuffle: {partitions: 8}
    timeout: 30m
    maxBadRecords: 100
    toleratedFailures: {percent: 2.5}
    speculation: {quantile: 0.9, multiplier: 2, maxCopies: 4}
    resources: {memory: 2GiB, maxMemory: 8589934592}
    lease: 90s
  - name: load
    task: report.load
    after: [extract]
    retry: {maxAttempts: 2}
    priority: low
  - name: notify
    lambda: arn:aws:lambda:eu-west-1:123456789012:function:notify:live
    after: [load]
    partitions:
      count: 2
      params: [{channel: ops}, {channel: "42"}]
    toleratedFailures: {count: 1}
  - name: audit
    lambda: audit-fn
    partitions: {input: {prefix: "s3://audit-bucket/logs/", format: jsonl, splitSize: 4096}}
    speculation: {}
    resources: {memory: 1073741824}
`

// The example specs (the repository's examples, the scaffold's, the CLI's
// valid test spec, the document's own) and a spec using every field are valid for both the
// parser and the document's JobSpec schema, so a tool that validates specs
// against the document agrees with the API on them.
func TestSpecSchemaAcceptsExampleSpecs(t *testing.T) {
	schema := specSchema(t)
	cases := map[string][]byte{
		"examples/wordcount":                             wordcount.Spec("wc", "s3://my-bucket/corpus/", 64<<20, 16),
		"examples/wordcount inputs:":                     wordcount.Spec("wc", "inputs:corpus/", 1<<20, 4),
		"examples/diamond":                               diamond.Spec("diamond", 3),
		"examples/join":                                  join.Spec("join", 3, 2, 4),
		"examples/join inputs":                           join.SpecInputs("join", []join.Prefix{{Prefix: "inputs:o/a/", Format: "csv"}, {Prefix: "s3://b-bucket/o/", Format: "jsonl"}}, "inputs:c/", 4),
		"examples/sort generated":                        sortex.GenSpec("sort", 3, 1000, 4),
		"examples/sort inputs:":                          sortex.Spec("sort", "inputs:sort/", 16<<20, 4),
		"cmd/batchwork/scaffold/templates/job.json.tmpl": readRepoFile(t, "cmd/batchwork/scaffold/templates/job.json.tmpl"),
		"cmd/batchwork/testdata/valid.yaml":              readRepoFile(t, "cmd/batchwork/testdata/valid.yaml"),
		"every field":                                    []byte(everyField),
	}
	example, err := json.Marshal(schema.Example)
	if err != nil || schema.Example == nil {
		t.Fatalf("JobSpec has no example: %v", err)
	}
	cases["openapi.yaml JobSpec example"] = example
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			job, err := spec.Parse(src)
			if err != nil {
				t.Fatalf("the parser refuses it: %v", err)
			}
			if err := schema.VisitJSON(specJSON(t, src), openapi3.MultiErrors()); err != nil {
				t.Errorf("the schema refuses it: %v", err)
			}
			// The stored, canonical form (what GET /schedules/{id}
			// returns as spec) is a spec too.
			canonical, err := job.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.VisitJSON(specJSON(t, canonical), openapi3.MultiErrors()); err != nil {
				t.Errorf("the schema refuses its canonical form %s: %v", canonical, err)
			}
		})
	}
}

// Specs the parser refuses for their form (a field it does not know, a
// value of the wrong type or out of range) are refused by the schema too.
func TestSpecSchemaRefusesWhatTheParserRefuses(t *testing.T) {
	schema := specSchema(t)
	const stage = `{name: a, task: t, partitions: {count: 1}}`
	cases := map[string]string{
		"unknown top-level field":     "name: x\ncolour: blue\nstages: [" + stage + "]",
		"unknown stage field":         "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, colour: blue}]",
		"unknown input field":         "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/', glob: '*.csv'}}}]",
		"count is a string":           "name: x\nstages: [{name: a, task: t, partitions: {count: '4'}}]",
		"negative count":              "name: x\nstages: [{name: a, task: t, partitions: {count: -1}}]",
		"count over the limit":        "name: x\nstages: [{name: a, task: t, partitions: {count: 100001}}]",
		"negative shuffle partitions": "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, shuffle: {partitions: -2}}, {name: b, task: t, after: [a]}]",
		"lease is a number":           "name: x\nlease: 30\nstages: [" + stage + "]",
		"lease has no unit":           "name: x\nlease: '30'\nstages: [" + stage + "]",
		"unknown priority":            "name: x\npriority: urgent\nstages: [" + stage + "]",
		"name with a space":           "name: word count\nstages: [" + stage + "]",
		"no stages":                   "name: x\nstages: []",
		"no name":                     "stages: [" + stage + "]",
		"task and exec":               "name: x\nstages: [{name: a, task: t, exec: [p], partitions: {count: 1}}]",
		"nothing to run":              "name: x\nstages: [{name: a, partitions: {count: 1}}]",
		"count and input":             "name: x\nstages: [{name: a, task: t, partitions: {count: 2, input: {prefix: 's3://bkt/p/'}}}]",
		"partitions without either":   "name: x\nstages: [{name: a, task: t, partitions: {}}]",
		"input and inputs":            "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/'}, inputs: [{prefix: 's3://bkt/q/'}]}}]",
		"count and inputs":            "name: x\nstages: [{name: a, task: t, partitions: {count: 2, inputs: [{prefix: 's3://bkt/q/'}]}}]",
		"inputs empty":                "name: x\nstages: [{name: a, task: t, partitions: {inputs: []}}]",
		"input name with a slash":     "name: x\nstages: [{name: a, task: t, partitions: {inputs: [{name: a/b, prefix: 's3://bkt/q/'}]}}]",
		"unknown format":              "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/', format: orc}}}]",
		"split size with a bad unit":  "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/', splitSize: 64mb}}}]",
		"split size under 4 KiB":      "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/', splitSize: 100}}}]",
		"prefix not s3 or inputs":     "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: '/data/'}}}]",
		"output without a slash":      "name: x\noutput: outputs:reports\nstages: [" + stage + "]",
		"memory not an executor size": "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, resources: {memory: 3GiB}}]",
		"percent over 100":            "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, toleratedFailures: {percent: 101}}]",
		"count and percent":           "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, toleratedFailures: {count: 1, percent: 5}}]",
		"maxAttempts is 0.5":          "name: x\nretry: {maxAttempts: 0.5}\nstages: [" + stage + "]",
		"dynamicSplit is a string":    "name: x\nstages: [{name: a, task: t, partitions: {input: {prefix: 's3://bkt/p/', dynamicSplit: 'yes'}}}]",
		"exec is empty":               "name: x\nstages: [{name: a, exec: [], partitions: {count: 1}}]",
		"lambda is not a function":    "name: x\nstages: [{name: a, lambda: 'arn:aws:s3:::bucket', partitions: {count: 1}}]",
		"maxConcurrency over 1000":    "name: x\nmaxConcurrency: 1001\nstages: [" + stage + "]",
		"params values are strings":   "name: x\nstages: [{name: a, task: t, partitions: {count: 1, params: [{shard: 3}]}}]",
		"speculation multiplier 0.5":  "name: x\nstages: [{name: a, task: t, partitions: {count: 1}, speculation: {multiplier: 0.5}}]",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := spec.Parse([]byte(src)); err == nil {
				t.Fatalf("the parser accepts it; the case is wrong:\n%s", src)
			}
			if err := schema.VisitJSON(specJSON(t, []byte(src))); err == nil {
				t.Errorf("the schema accepts what the parser refuses:\n%s", src)
			}
		})
	}
}

// pendingSchemaFields are properties the schema documents before their Go
// field exists, because they are being added to shared/spec in parallel.
// Delete each entry once shared/spec has its field: the test then fails
// naming it, so the set cannot outlive the work it waits for.
var pendingSchemaFields = map[string]bool{}

// Every field of shared/spec's Job, down through its stages, has a
// property in the JobSpec schema of a matching type, and every property
// has a field (or is pending), so a field added to the spec cannot be
// missing from the document.
func TestSpecSchemaCoversSpecTypes(t *testing.T) {
	schema := specSchema(t)
	seenPending := map[string]bool{}
	var walk func(goType reflect.Type, s *openapi3.Schema)
	walk = func(goType reflect.Type, s *openapi3.Schema) {
		fields := map[string]reflect.StructField{}
		for f := range fieldsOf(goType) {
			fields[jsonName(f)] = f
		}
		for _, name := range sortedKeys(fields) {
			f := fields[name]
			where := goType.Name() + "." + f.Name
			prop := s.Properties[name]
			if prop == nil || prop.Value == nil {
				t.Errorf("%s (json %q) has no property in the schema of %s", where, name, goType.Name())
				continue
			}
			if msg := typeMismatch(f.Type, prop.Value); msg != "" {
				t.Errorf("%s (json %q): %s", where, name, msg)
				continue
			}
			if next, sub := structBelow(f.Type, prop.Value); next != nil {
				walk(next, sub)
			}
		}
		for name := range s.Properties {
			if _, ok := fields[name]; ok {
				continue
			}
			key := goType.Name() + "." + name
			if pendingSchemaFields[key] {
				seenPending[key] = true
				continue
			}
			t.Errorf("the schema of %s has property %q, which spec.%s lacks", goType.Name(), name, goType.Name())
		}
	}
	walk(reflect.TypeFor[spec.Job](), schema)
	for key := range pendingSchemaFields {
		if !seenPending[key] {
			t.Errorf("pending field %s now exists in shared/spec (or left the schema): delete it from pendingSchemaFields", key)
		}
	}
}

func fieldsOf(t reflect.Type) func(func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				if !yield(f) {
					return
				}
			}
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// schemaTypes are the JSON types a schema allows, through oneOf, anyOf
// and allOf.
func schemaTypes(s *openapi3.Schema) []string {
	var out []string
	if s.Type != nil {
		out = append(out, s.Type.Slice()...)
	}
	// allOf counts too: the document wraps a $ref in a one-element allOf
	// to give it its own description.
	for _, refs := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
		for _, r := range refs {
			out = append(out, schemaTypes(r.Value)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// typeMismatch says how a property's schema fails to hold what the Go
// field decodes from, or "" when it holds it.
func typeMismatch(goType reflect.Type, s *openapi3.Schema) string {
	want := func(types ...string) string {
		if got := schemaTypes(s); !slices.Equal(got, types) {
			return "the schema allows " + strings.Join(got, ", ") + "; the parser reads " + strings.Join(types, ", ")
		}
		return ""
	}
	switch goType {
	case reflect.TypeFor[spec.Duration]():
		return want("string")
	case reflect.TypeFor[spec.Size]():
		return want("integer", "string")
	}
	switch goType.Kind() {
	case reflect.Pointer:
		return typeMismatch(goType.Elem(), s)
	case reflect.String:
		return want("string")
	case reflect.Int, reflect.Int64:
		return want("integer")
	case reflect.Float64:
		return want("number")
	case reflect.Bool:
		return want("boolean")
	case reflect.Map:
		if msg := want("object"); msg != "" {
			return msg
		}
		if ap := s.AdditionalProperties.Schema; ap == nil || typeMismatch(goType.Elem(), ap.Value) != "" {
			return "the schema's additionalProperties do not hold " + goType.Elem().String()
		}
		return ""
	case reflect.Slice:
		if msg := want("array"); msg != "" {
			return msg
		}
		if s.Items == nil || s.Items.Value == nil {
			return "the schema's array has no items"
		}
		return typeMismatch(goType.Elem(), s.Items.Value)
	case reflect.Struct:
		return want("object")
	}
	return "no rule for Go type " + goType.String()
}

// structBelow returns the struct a field holds (through pointers and
// slices) with the schema that describes it, or nil.
func structBelow(goType reflect.Type, s *openapi3.Schema) (reflect.Type, *openapi3.Schema) {
	for {
		switch goType.Kind() {
		case reflect.Pointer:
			goType = goType.Elem()
		case reflect.Slice:
			goType, s = goType.Elem(), s.Items.Value
		case reflect.Struct:
			return goType, s
		default:
			return nil, nil
		}
	}
}

// A schedule as the schedules test creates it is valid for the parser and
// the document's schedule body; what shared/schedule refuses in its form,
// the schema refuses too.
func TestScheduleSchemaMatchesParser(t *testing.T) {
	d, _ := loadDoc(t)
	ref := d.Components.Schemas["ScheduleRequest"]
	if ref == nil || ref.Value == nil {
		t.Fatal("openapi.yaml has no components.schemas.ScheduleRequest")
	}
	schema := ref.Value
	const job = `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`
	cases := []struct {
		name  string
		body  string
		valid bool
	}{
		{"cron", `{"name":"nightly","expression":"30 2 * * *","timeZone":"Europe/Paris","spec":` + job + `}`, true},
		{"rate with every field", `{"name":"often","expression":"rate(5 minutes)","start":"2026-01-01T00:00:00Z","end":"2027-01-01T00:00:00+01:00","overlap":"cancelPrevious","catchUp":"skipMissed","paused":true,"spec":` + job + `}`, true},
		{"server field", `{"id":"s1","name":"n","expression":"@daily","spec":` + job + `}`, false},
		{"unknown field", `{"name":"n","expression":"@daily","cron":"x","spec":` + job + `}`, false},
		{"no spec", `{"name":"n","expression":"@daily"}`, false},
		{"spec is a string", `{"name":"n","expression":"@daily","spec":"name: x"}`, false},
		{"invalid spec", `{"name":"n","expression":"@daily","spec":{"name":"x","stages":[]}}`, false},
		{"unknown overlap", `{"name":"n","expression":"@daily","overlap":"queue","spec":` + job + `}`, false},
		{"start is not a time", `{"name":"n","expression":"@daily","start":"tomorrow","spec":` + job + `}`, false},
		{"paused is a string", `{"name":"n","expression":"@daily","paused":"true","spec":` + job + `}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, perr := schedule.Parse([]byte(tc.body))
			if (perr == nil) != tc.valid {
				t.Fatalf("parser: %v, want valid=%v; the case is wrong", perr, tc.valid)
			}
			var v any
			if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
				t.Fatal(err)
			}
			serr := schema.VisitJSON(v, openapi3.EnableFormatValidation())
			if (serr == nil) != tc.valid {
				t.Errorf("schema: %v, want valid=%v", serr, tc.valid)
			}
		})
	}
}

// POST /jobs and POST /schedules describe their bodies with the spec
// schema, in every media type they accept.
func TestSubmitBodiesAreSpecs(t *testing.T) {
	d, _ := loadDoc(t)
	want := map[string]string{
		"POST /jobs application/json":      "#/components/schemas/JobSpec",
		"POST /jobs application/yaml":      "#/components/schemas/JobSpec",
		"POST /schedules application/json": "#/components/schemas/ScheduleRequest",
	}
	for key, ref := range want {
		method, rest, _ := strings.Cut(key, " ")
		path, media, _ := strings.Cut(rest, " ")
		op := d.Paths.Find(path).GetOperation(method)
		mt := op.RequestBody.Value.Content.Get(media)
		if mt == nil || mt.Schema == nil || mt.Schema.Ref != ref {
			t.Errorf("%s: body schema is not %s", key, ref)
		}
	}
	body := d.Components.Schemas["ScheduleRequest"]
	if body == nil || body.Value.Properties["spec"] == nil || body.Value.Properties["spec"].Ref != "#/components/schemas/JobSpec" {
		t.Errorf("ScheduleRequest.spec is not a JobSpec")
	}
}

// The schema never refuses a spec the parser accepts: mutations of the
// every-field spec (values of every type and edge, nulls, which YAML's
// "key:" gives and the parser takes as absent, and empty and zero values,
// which it takes as not given) are checked against both. The schema cannot
// see across fields (unknown stages in after, params per count), so the
// other direction is only the form cases above.
func TestSpecSchemaAcceptsWhatTheParserAccepts(t *testing.T) {
	schema := specSchema(t)
	base, err := json.Marshal(specJSON(t, []byte(everyField)))
	if err != nil {
		t.Fatal(err)
	}
	var paths [][]any
	var walk func(v any, at []any)
	walk = func(v any, at []any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				p := append(slices.Clone(at), k)
				paths = append(paths, p)
				walk(x[k], p)
			}
		case []any:
			for i, e := range x {
				p := append(slices.Clone(at), i)
				paths = append(paths, p)
				walk(e, p)
			}
		}
	}
	walk(specJSON(t, base), nil)
	values := []any{nil, 0, -1, 1, 2, 0.5, 1.5, 100, 101, 1000, 1001, 4095, 4096, 1 << 30, 3 << 30,
		"", "0", "0s", "30s", "1h", "-5s", "169h", "x", "a.b", "a b", "64MiB", "1GiB", "3GiB", "1024 MiB",
		"s3://bkt/p/", "inputs:", "inputs:/x", "outputs:x/", "csv", "high", "Hi", true, false,
		[]any{}, []any{"a"}, map[string]any{}}
	rnd := rand.New(rand.NewPCG(27, 17))
	for range 4_000 {
		var v any
		if err := json.Unmarshal(base, &v); err != nil {
			t.Fatal(err)
		}
		var changes []string
		for range 1 + rnd.IntN(2) {
			p, val := paths[rnd.IntN(len(paths))], values[rnd.IntN(len(values))]
			v = setAt(v, p, val)
			changes = append(changes, fmt.Sprintf("%v=%#v", p, val))
		}
		src, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := spec.Parse(src); err != nil {
			continue
		}
		if err := schema.VisitJSON(specJSON(t, src)); err != nil {
			t.Fatalf("the parser accepts the every-field spec with %s; the schema refuses it: %v", strings.Join(changes, ", "), err)
		}
	}
}

// setAt sets the value at path p in v, when v has that path.
func setAt(v any, p []any, val any) any {
	if len(p) == 0 {
		return val
	}
	switch x := v.(type) {
	case map[string]any:
		if k, ok := p[0].(string); ok {
			x[k] = setAt(x[k], p[1:], val)
		}
	case []any:
		if i, ok := p[0].(int); ok && i < len(x) {
			x[i] = setAt(x[i], p[1:], val)
		}
	}
	return v
}
