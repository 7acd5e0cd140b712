package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Run parameters (Job.Params): values a submission gives a spec, named in
// it as ${params.NAME}. A spec declares each one, with a default or with
// none (null: every submission must set it); placeholders may appear in
// input prefixes, the output folder, partition params' values and exec
// arguments (after the program), and nowhere else. Resolve replaces them
// at submit: the stored spec holds the resolved text, and its Params every
// value, defaults included, which is also what tasks read (RunParams).
// "$${params" stands for the text "${params" itself; any other "$" is
// literal, so a shell's ${HOME} in an exec argument is left alone.
//
// A resolved spec is never resolved again (a rerun submits it as stored):
// a value or an escape may have left "${params" text in it on purpose.

// Reserved names a schedule's firing sets to its own slot (the scheduled
// time, not the time it fired), in UTC: any spec may name them without
// declaring them, and a submission may set them (a manual backfill).
const (
	ParamScheduledTime = "scheduledTime" // RFC 3339, e.g. 2026-03-01T02:30:00Z
	ParamScheduledDate = "scheduledDate" // YYYY-MM-DD
)

// Limits on run parameters. The resolved values are stored in the spec,
// on the job record and in every claim's copy of it: 32 values of at most
// 1 KiB, and 8 KiB of JSON in all, keep that a few percent of
// MaxSpecBytes, itself well under DynamoDB's 400 KB item. Each value is
// also an environment variable of an exec stage's program.
const (
	MaxRunParams          = 32
	MaxRunParamValueBytes = 1024
	MaxRunParamsBytes     = 8 << 10
)

var paramNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Reserved reports whether name is one a schedule's firing sets.
func Reserved(name string) bool { return name == ParamScheduledTime || name == ParamScheduledDate }

// RunParams returns the resolved spec's run parameters, or nil when it
// has none. On a spec not yet resolved it returns the defaults.
func (j *Job) RunParams() map[string]string {
	if len(j.Params) == 0 {
		return nil
	}
	out := make(map[string]string, len(j.Params))
	for k, v := range j.Params {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// runParams decodes the params declaration: a mapping of names to
// defaults. A default is a scalar taken as written (YAML's 2026-03-01 or
// 7 need no quotes); null declares a parameter without one.
func (d *decoder) runParams(n *yaml.Node, path string) map[string]*string {
	if isNull(n) {
		return nil
	}
	m := make(map[string]*string)
	for _, p := range d.mapping(n, path) {
		fp := path + "." + p.key
		d.lines[fp] = p.line
		r := d.scalar(p.val, fp, "must be a string (the default) or null (no default: every submission sets it)",
			"!!str", "!!int", "!!float", "!!bool", "!!timestamp")
		if r == nil {
			m[p.key] = nil
			continue
		}
		v := r.Value
		m[p.key] = &v
	}
	if len(m) == 0 {
		return nil // params: {} is no params, as Encode writes it
	}
	return m
}

// checkRunParams checks the declaration (Parse calls it).
func checkRunParams(errs *errorList, m map[string]*string) {
	if len(m) > MaxRunParams {
		errs.add("params", fmt.Sprintf("declares %d parameters; at most %d are allowed", len(m), MaxRunParams))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f := "params." + k
		if msg := paramNameProblem(k); msg != "" {
			errs.add(f, msg)
		}
		if v := m[k]; v != nil {
			if msg := paramValueProblem(*v); msg != "" {
				errs.add(f, "default "+msg)
			}
		}
	}
}

func paramNameProblem(k string) string {
	switch {
	case len(k) > MaxNameLen:
		return fmt.Sprintf("the name must be at most %d characters", MaxNameLen)
	case !paramNamePattern.MatchString(k):
		return fmt.Sprintf("%q is not a parameter name: start with a letter or '_', then letters, digits and '_'", k)
	}
	return ""
}

func paramValueProblem(v string) string {
	switch {
	case len(v) > MaxRunParamValueBytes:
		return fmt.Sprintf("is %d bytes; at most %d are allowed", len(v), MaxRunParamValueBytes)
	case !utf8.ValidString(v):
		return "must be valid UTF-8"
	case strings.ContainsRune(v, 0):
		return "must not contain NUL"
	}
	return ""
}

// hasPlaceholder reports whether s holds a ${params...} placeholder (or
// its escape): Parse leaves the form of such a field to Resolve, which
// checks the resolved text.
func hasPlaceholder(s string) bool { return strings.Contains(s, "${params") }

// Resolve returns a copy of j with every placeholder replaced by its
// value (given, else the default) and Params holding every value; j is
// not changed. given may set declared parameters and the reserved ones.
// Every problem is reported, as a *ValidationError: a given name the spec
// does not declare (field "param"), a required parameter without a value
// ("params.NAME"), an unknown or malformed placeholder (the field holding
// it), and the resolved spec's own validation.
func (j *Job) Resolve(given map[string]string) (*Job, error) {
	if len(j.Params) == 0 && len(given) == 0 {
		// No values: a spec without placeholders is its own resolution.
		if b, err := j.Encode(); err == nil && !hasPlaceholder(string(b)) {
			return j, nil
		}
	}
	var errs errorList
	values := make(map[string]string, len(j.Params)+len(given))
	for k, v := range j.Params {
		if v != nil {
			values[k] = *v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		v := given[k]
		if _, ok := j.Params[k]; !ok && !Reserved(k) {
			errs.add("param", fmt.Sprintf("%q is not a parameter of this spec (%s)", k, declared(j.Params)))
			continue
		}
		if msg := paramValueProblem(v); msg != "" {
			errs.add("param", fmt.Sprintf("%s: the value %s", k, msg))
		}
		values[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(j.Params)) {
		if _, ok := values[k]; !ok {
			errs.add("params."+k, fmt.Sprintf("has no default and no value: set it (batchwork submit --param %s=VALUE; POST /jobs?param=%s=VALUE)", k, k))
		}
	}
	if len(values) > MaxRunParams {
		errs.add("param", fmt.Sprintf("%d parameters are set; at most %d are allowed", len(values), MaxRunParams))
	}
	if b, err := encodeJSON(values); err == nil && len(b) > MaxRunParamsBytes {
		errs.add("param", fmt.Sprintf("the parameters encode to %d bytes of JSON; at most %d are allowed", len(b), MaxRunParamsBytes))
	}

	r, err := j.clone()
	if err != nil {
		return nil, err
	}
	sub := func(field string, s *string) {
		out, fe := substitute(*s, values, j.Params)
		if fe != "" {
			errs.add(field, fe)
			return
		}
		*s = out
	}
	sub("output", &r.Output)
	for i := range r.Stages {
		s := &r.Stages[i]
		p := stagePath(i)
		for a := 1; a < len(s.Exec); a++ { // exec[0] is the program: never a parameter
			sub(p+".exec["+strconv.Itoa(a)+"]", &s.Exec[a])
		}
		P := s.Partitions
		if P == nil {
			continue
		}
		if P.Input != nil {
			sub(p+".partitions.input.prefix", &P.Input.Prefix)
		}
		for k := range P.Inputs {
			sub(p+".partitions.inputs["+strconv.Itoa(k)+"].prefix", &P.Inputs[k].Prefix)
		}
		for k, m := range P.Params {
			for _, key := range slices.Sorted(maps.Keys(m)) {
				v := m[key]
				sub(p+".partitions.params["+strconv.Itoa(k)+"]."+key, &v)
				m[key] = v
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs.err()
	}
	r.Params = nil
	if len(values) > 0 {
		r.Params = make(map[string]*string, len(values))
		for k, v := range values {
			r.Params[k] = &v
		}
	}
	errs = r.validate()
	errs = append(errs, r.checkLiteralForms()...)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return r, nil
}

// checkLiteralForms checks the forms validate leaves alone in fields
// holding "${params" text: in a resolved spec that text is literal (an
// escape's, or a value's).
func (r *Job) checkLiteralForms() errorList {
	var errs errorList
	if hasPlaceholder(r.Output) {
		if err := outputForm(r.Output); err != nil {
			errs.add("output", err.Error())
		}
	}
	for i, s := range r.Stages {
		if s.Partitions == nil {
			continue
		}
		if in := s.Partitions.Input; in != nil && hasPlaceholder(in.Prefix) {
			if err := checkInputPrefix(in.Prefix); err != nil {
				errs.add(stagePath(i)+".partitions.input.prefix", err.Error())
			}
		}
		for k, in := range s.Partitions.Inputs {
			if hasPlaceholder(in.Prefix) {
				if err := checkInputPrefix(in.Prefix); err != nil {
					errs.add(stagePath(i)+".partitions.inputs["+strconv.Itoa(k)+"].prefix", err.Error())
				}
			}
		}
	}
	return errs
}

// substitute resolves the placeholders of s; a problem is returned as a
// message for the field holding s.
func substitute(s string, values map[string]string, decl map[string]*string) (string, string) {
	const open = "${params"
	if !strings.Contains(s, open) {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$"+open):
			b.WriteString(open)
			i += 1 + len(open)
		case strings.HasPrefix(rest, open):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Sprintf("%q opens a parameter reference that is never closed: write ${params.NAME}, or $${params for the text itself", clip(rest))
			}
			ref := rest[:end+1]
			name, ok := strings.CutPrefix(ref[2:end], "params.")
			if !ok || paramNameProblem(name) != "" {
				return "", fmt.Sprintf("%q is not a parameter reference: write ${params.NAME}, or $${params for the text itself", clip(ref))
			}
			v, ok := values[name]
			if !ok {
				if _, isDecl := decl[name]; isDecl {
					return "", fmt.Sprintf("%s has no value (see params.%s)", ref, name)
				}
				return "", fmt.Sprintf("%s names a parameter this spec does not declare (%s)", ref, declared(decl))
			}
			b.WriteString(v)
			i += end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// declared lists the declared names for an error message.
func declared(decl map[string]*string) string {
	if len(decl) == 0 {
		return "it declares no params"
	}
	return "it declares " + strings.Join(slices.Sorted(maps.Keys(decl)), ", ")
}

// clone deep-copies j through its encoding.
func (j *Job) clone() (*Job, error) {
	b, err := j.Encode()
	if err != nil {
		return nil, fmt.Errorf("resolve params: %w", err)
	}
	c := new(Job)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("resolve params: %w", err)
	}
	return c, nil
}
