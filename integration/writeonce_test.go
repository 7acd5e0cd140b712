package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/provision"
)

// "Published outputs never change" is enforced by the data bucket's
// policy: it denies every principal an object-creating write under the
// job area (jobs/) that does not carry If-None-Match, and denies every
// principal but the installation's roles any change there at all. The
// emulator enforces no bucket policy, so this file proves the code
// against the template's policy instead: every env's clients record each
// object write, tag and delete as it went out, conditional headers
// included (iamrec.WriteRecorder), and after the whole run checkWriteOnce
// evaluates each one on a data bucket against the Deny statements of the
// synthesized bucket policy, as made by the role of the function it is
// attributed to. A request the policy would deny on AWS fails the run, so
// a code path that overwrites (or forgets the header), or a function
// whose role the policy leaves out, cannot pass here and fail only on AWS.

// writeRec records the object writes of every env (newEnv installs it).
var writeRec = iamrec.NewWriteRecorder()

// bucketPolicy is the data bucket's policy as this check models it.
type bucketPolicy struct {
	denies []bucketDeny
	// roleOf maps a function to its role's logical id.
	roleOf map[string]string
}

// bucketDeny is one Deny statement of the data bucket's policy.
type bucketDeny struct {
	index   int
	actions []string
	// keys are the object key patterns it names (IAM wildcards: * any
	// run of characters, / included, and ? one character); naming the
	// bucket itself denies nothing to an object write.
	keys []string
	// conditions: operator -> condition key -> value ("true"/"false").
	conditions map[string]map[string]string
	// exceptPrincipals, for ArnNotEquals aws:PrincipalArn, are the
	// principals the statement spares: "role:<logical id>" for a role of
	// the template, or an ARN.
	exceptPrincipals map[string]bool
}

func (d bucketDeny) String() string {
	cond := map[string]any{}
	for op, kv := range d.conditions {
		cond[op] = kv
	}
	if d.exceptPrincipals != nil {
		cond["ArnNotEquals"] = map[string]any{"aws:PrincipalArn": fmt.Sprintf("%d principals", len(d.exceptPrincipals))}
	}
	raw, _ := json.Marshal(map[string]any{"Action": d.actions, "Resource": d.keys, "Condition": cond})
	return fmt.Sprintf("statement %d %s", d.index, raw)
}

// loadBucketPolicy reads the Deny statements of the data bucket's policy
// (the bucket of the BucketName output) out of a synthesized template,
// with the functions' roles, and fails on anything this check does not
// model: an Allow, a principal other than everyone, a condition operator
// or key it does not evaluate.
func loadBucketPolicy(raw []byte) (bucketPolicy, error) {
	t, err := parseTemplate(raw)
	if err != nil {
		return bucketPolicy{}, err
	}
	bucket := refID(t.Outputs[template.OutBucket].Value)
	if bucket == "" {
		return bucketPolicy{}, fmt.Errorf("no %s output naming the data bucket", template.OutBucket)
	}
	pol := bucketPolicy{roleOf: map[string]string{}}
	for _, r := range t.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		desc, _ := r.Properties["Description"].(string)
		if fn, ok := strings.CutPrefix(desc, "Batchwork "); ok {
			pol.roleOf[fn] = refID(r.Properties["Role"])
		}
	}
	var errs []error
	policies := 0
	for id, r := range t.Resources {
		if r.Type != "AWS::S3::BucketPolicy" || refID(r.Properties["Bucket"]) != bucket {
			continue
		}
		policies++
		doc, _ := r.Properties["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		for i, s := range stmts {
			st, _ := s.(map[string]any)
			d, err := parseBucketDeny(i, st, bucket)
			if err != nil {
				errs = append(errs, fmt.Errorf("bucket policy %s, statement %d: %w", id, i, err))
				continue
			}
			pol.denies = append(pol.denies, d)
		}
	}
	if policies != 1 {
		errs = append(errs, fmt.Errorf("%d bucket policies on the data bucket, want 1", policies))
	}
	return pol, errors.Join(errs...)
}

// The condition keys the check knows the value of for an object write.
var writeConditionKeys = map[string]bool{
	"aws:SecureTransport": true, "s3:if-none-match": true, "s3:if-match": true, "s3:ObjectCreationOperation": true,
}

func parseBucketDeny(i int, st map[string]any, bucket string) (bucketDeny, error) {
	d := bucketDeny{index: i, conditions: map[string]map[string]string{}}
	if st["Effect"] != "Deny" {
		return d, fmt.Errorf("effect %v: only Deny statements are checked here", st["Effect"])
	}
	for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
		if st[k] != nil {
			return d, fmt.Errorf("%s is not modelled here", k)
		}
	}
	switch p := st["Principal"].(type) {
	case string:
		if p != "*" {
			return d, fmt.Errorf("principal %v: only everyone is modelled here", p)
		}
	case map[string]any:
		if len(p) != 1 || p["AWS"] != "*" {
			return d, fmt.Errorf("principal %v: only everyone is modelled here", p)
		}
	default:
		return d, fmt.Errorf("principal %v: only everyone is modelled here", st["Principal"])
	}
	for _, a := range asList(st["Action"]) {
		s, _ := a.(string)
		d.actions = append(d.actions, s)
	}
	for _, res := range asList(st["Resource"]) {
		if refID(res) == bucket {
			continue // the bucket itself
		}
		key, ok := objectPattern(res, bucket)
		if !ok {
			return d, fmt.Errorf("resource %v: not the bucket or an object pattern in it", res)
		}
		d.keys = append(d.keys, key)
	}
	cond, _ := st["Condition"].(map[string]any)
	for op, kv := range cond {
		if op == "ArnNotEquals" {
			m, _ := kv.(map[string]any)
			if len(m) != 1 || m["aws:PrincipalArn"] == nil {
				return d, fmt.Errorf("condition ArnNotEquals %v: only aws:PrincipalArn is evaluated here", kv)
			}
			d.exceptPrincipals = map[string]bool{}
			for _, v := range asList(m["aws:PrincipalArn"]) {
				switch {
				case refID(v) != "":
					d.exceptPrincipals["role:"+refID(v)] = true
				default:
					s, ok := v.(string)
					if !ok {
						return d, fmt.Errorf("condition ArnNotEquals aws:PrincipalArn: %v is no role of the template or ARN", v)
					}
					d.exceptPrincipals[s] = true
				}
			}
			continue
		}
		if op != "Null" && op != "Bool" {
			return d, fmt.Errorf("condition operator %s is not evaluated here", op)
		}
		m, _ := kv.(map[string]any)
		d.conditions[op] = map[string]string{}
		for k, v := range m {
			if !writeConditionKeys[k] {
				return d, fmt.Errorf("condition key %s is not evaluated here", k)
			}
			s, ok := v.(string)
			if !ok || (s != "true" && s != "false") {
				return d, fmt.Errorf("condition %s %s: value %v, want \"true\" or \"false\"", op, k, v)
			}
			d.conditions[op][k] = s
		}
	}
	return d, nil
}

// objectPattern returns P of {"Fn::Join": ["", [{"Fn::GetAtt": [bucket,
// "Arn"]}, "/P"]]}.
func objectPattern(v any, bucket string) (string, bool) {
	m, _ := v.(map[string]any)
	j, _ := m["Fn::Join"].([]any)
	if len(j) != 2 || j[0] != "" {
		return "", false
	}
	parts, _ := j[1].([]any)
	if len(parts) != 2 || refID(parts[0]) != bucket {
		return "", false
	}
	s, _ := parts[1].(string)
	key, ok := strings.CutPrefix(s, "/")
	return key, ok && key != ""
}

// writeContext is the request context a write presents to the policy. On
// AWS every request of the SDK goes over TLS; the emulator's plain HTTP
// on loopback is the test's, not the code's. s3:ObjectCreationOperation
// belongs to the requests authorized as s3:PutObject.
func writeContext(w iamrec.ObjectWrite) map[string]string {
	c := map[string]string{"aws:SecureTransport": "true"}
	if w.Action == "s3:PutObject" {
		c["s3:ObjectCreationOperation"] = fmt.Sprint(w.Creation)
	}
	if w.HasIfNoneMatch {
		c["s3:if-none-match"] = w.IfNoneMatch
	}
	if w.HasIfMatch {
		c["s3:if-match"] = w.IfMatch
	}
	return c
}

// resourceMatches reports whether the statement names the write's object.
func (d bucketDeny) resourceMatches(key string) bool {
	for _, p := range d.keys {
		if iamGlob(p, key) {
			return true
		}
	}
	return false
}

// principalOf is who makes a write: the role of the function it is
// attributed to, or, for a write no function is named for (the tests
// drive the control plane and executors on untagged contexts too, and
// set up inputs), one of the installation's roles. A function the
// template does not deploy has no role there.
func (p bucketPolicy) principalOf(w iamrec.ObjectWrite) string {
	if w.Function == "" {
		return installationRole
	}
	if id, ok := p.roleOf[w.Function]; ok && id != "" {
		return "role:" + id
	}
	return "function " + w.Function + ", which the template does not deploy"
}

const installationRole = "a role of the installation"

// denies reports whether the statement denies the write by principal.
func (d bucketDeny) denies(w iamrec.ObjectWrite, principal string) bool {
	action := false
	for _, a := range d.actions {
		if strings.EqualFold(a, "s3:*") || strings.EqualFold(a, w.Action) {
			action = true
		}
	}
	if !action || !d.resourceMatches(w.Key) {
		return false
	}
	if d.exceptPrincipals != nil && (principal == installationRole || d.exceptPrincipals[principal]) {
		return false
	}
	ctx := writeContext(w)
	for op, kv := range d.conditions {
		for k, want := range kv {
			v, present := ctx[k]
			switch op {
			case "Null": // "true": the key is absent
				if present == (want == "true") {
					return false
				}
			case "Bool":
				if !present || v != want {
					return false
				}
			}
		}
	}
	return true
}

// iamGlob matches s against an IAM resource pattern: * matches any run of
// characters (slashes too), ? any one character.
func iamGlob(pattern, s string) bool {
	// Iterative wildcard match with backtracking to the last *.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p, mark = star+1, mark+1
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// checkWriteOnce evaluates the recorded writes to data buckets against
// the policy's Deny statements. Every write a statement would deny is an
// error. With checkCovered (a full, passing run), a statement that denies
// object writes must also have seen at least one write to an object it
// names: a policy whose resources the code never writes proves nothing.
func checkWriteOnce(pol bucketPolicy, writes []iamrec.RecordedWrite, checkCovered bool) (summary string, err error) {
	denies := pol.denies
	var errs []error
	covered := make([]int, len(denies))
	data, creations := 0, 0
	for _, w := range writes {
		iamNames.Lock()
		out := iamNames.output[w.Bucket]
		iamNames.Unlock()
		if out != template.OutBucket {
			continue // a bucket of no installation: the policy is not on it
		}
		data += w.Requests
		if w.Creation {
			creations += w.Requests
		}
		for i, d := range denies {
			if w.Creation && d.resourceMatches(w.Key) {
				covered[i] += w.Requests
			}
			if principal := pol.principalOf(w.ObjectWrite); d.denies(w.ObjectWrite, principal) {
				who := w.Function
				if who == "" {
					who = "untagged (a test driving the code, or test setup)"
				}
				errs = append(errs, fmt.Errorf("%s %s s3://<data bucket>/%s (%d requests; If-None-Match %q present %v; as %s) is denied by the bucket policy's %s",
					who, w.Operation, w.Key, w.Requests, w.IfNoneMatch, w.HasIfNoneMatch, principal, d))
			}
		}
	}
	if checkCovered {
		for i, d := range denies {
			if covered[i] == 0 && denyWrites(d) {
				errs = append(errs, fmt.Errorf("no recorded object-creating write falls under the bucket policy's %s", d))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d object writes, tags and deletes on data buckets (%d creating objects)", data, creations)
	for i, d := range denies {
		fmt.Fprintf(&b, "\n  %d object-creating writes under %s", covered[i], d)
	}
	return b.String(), errors.Join(errs...)
}

// denyWrites reports whether a statement can deny an object write.
func denyWrites(d bucketDeny) bool {
	for _, a := range d.actions {
		if strings.EqualFold(a, "s3:PutObject") {
			return len(d.keys) > 0
		}
	}
	return false
}

// writeOnceMain runs the check after the package's tests (TestMain), as
// iamMain does, and returns whether it passed. A write of a function the
// default stack does not deploy (claim and commit, which serve remote
// executors) is checked against the stack that deploys them.
func writeOnceMain(w io.Writer, verbose, testsPassed bool) bool {
	def, err := loadBucketPolicy(template.JSON)
	if err == nil {
		var remote bucketPolicy
		if remote, err = loadBucketPolicy(template.RemoteExecutorsJSON); err == nil {
			var ours, theirs []iamrec.RecordedWrite
			for _, x := range writeRec.Writes() {
				if _, deployed := def.roleOf[x.Function]; x.Function != "" && !deployed && remote.roleOf[x.Function] != "" {
					theirs = append(theirs, x)
				} else {
					ours = append(ours, x)
				}
			}
			const what = "object writes against the data bucket policy of infra/template"
			summary, err := checkWriteOnce(def, ours, testsPassed && fullRun())
			rsummary, rerr := checkWriteOnce(remote, theirs, false)
			summary += "\nwith the remote executors' functions: " + rsummary
			if err = errors.Join(err, rerr); err != nil {
				fmt.Fprintf(w, "--- FAIL: write-once check (%s)\n%v\n%s\n", what, err, summary)
				return false
			}
			if verbose {
				fmt.Fprintf(w, "--- PASS: write-once check (%s)\n%s\n", what, summary)
			}
			return true
		}
	}
	fmt.Fprintf(w, "--- FAIL: write-once check: %v\n", err)
	return false
}

// writeOnceTemplate is a minimal template whose data bucket has the
// installation's three statements: TLS only; write-once under jobs/; and
// under jobs/ nothing changed but by the roles of the executor and the
// api (the sweep's role is left out, to be caught).
func writeOnceTemplate(t *testing.T, extra ...map[string]any) []byte {
	t.Helper()
	arn := func(id string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }
	objects := func(p string) map[string]any { return map[string]any{"Fn::Join": []any{"", []any{arn("B"), p}}} }
	stmts := []any{
		map[string]any{"Effect": "Deny", "Principal": map[string]any{"AWS": "*"}, "Action": "s3:*", "Resource": []any{arn("B"), objects("/*")},
			"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}},
		map[string]any{"Effect": "Deny", "Principal": map[string]any{"AWS": "*"}, "Action": "s3:PutObject", "Resource": objects("/jobs/*"),
			"Condition": map[string]any{"Null": map[string]any{"s3:if-none-match": "true"}, "Bool": map[string]any{"s3:ObjectCreationOperation": "true"}}},
		map[string]any{"Effect": "Deny", "Principal": map[string]any{"AWS": "*"}, "Action": []any{"s3:DeleteObject", "s3:PutObject", "s3:PutObjectTagging"},
			"Resource":  objects("/jobs/*"),
			"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": []any{arn("ExecRole"), arn("ApiRole"), "arn:aws:iam::123456789012:role/remote"}}}},
	}
	for _, x := range extra {
		stmts = append(stmts, x)
	}
	fn := func(name, role string) map[string]any {
		return map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{"Description": "Batchwork " + name, "Role": arn(role)}}
	}
	raw, err := json.Marshal(map[string]any{
		"Resources": map[string]any{
			"B": map[string]any{"Type": "AWS::S3::Bucket"},
			"P": map[string]any{"Type": "AWS::S3::BucketPolicy", "Properties": map[string]any{
				"Bucket": map[string]any{"Ref": "B"}, "PolicyDocument": map[string]any{"Statement": stmts},
			}},
			"Exec": fn(iamrec.FnExecutor, "ExecRole"), "Api": fn(iamrec.FnAPI, "ApiRole"), "Sweep": fn(iamrec.FnSweep, "SweepRole"),
		},
		"Outputs": map[string]any{template.OutBucket: map[string]any{"Value": map[string]any{"Ref": "B"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The check itself: under jobs/ an object-creating write without
// If-None-Match is denied, one with it (or a multipart step, which cannot
// carry it) is not; outside jobs/ nothing is; a function whose role the
// policy does not spare may change nothing under jobs/, while a write
// attributed to no function counts as the installation's; a policy the
// check cannot evaluate is an error, and so is a full run that never wrote
// under a statement's resource.
func TestWriteOnceCheck(t *testing.T) {
	t.Parallel()
	const bucket = "writeonce-unit-bucket"
	noteIAMResources(provision.Resources{Bucket: bucket})
	write := func(fn, op, action, key string, creation, header bool) iamrec.RecordedWrite {
		w := iamrec.ObjectWrite{Function: fn, Operation: op, Action: action, Bucket: bucket, Key: key, Creation: creation}
		if header {
			w.IfNoneMatch, w.HasIfNoneMatch = "*", true
		}
		return iamrec.RecordedWrite{ObjectWrite: w, Requests: 1}
	}
	put := func(key string, header bool) iamrec.RecordedWrite {
		return write(iamrec.FnExecutor, "PutObject", "s3:PutObject", key, true, header)
	}
	part := write("", "UploadPart", "s3:PutObject", "jobs/j/big", false, false)
	overwrite := put("jobs/j/manifest.json", false)
	overwrite.IfMatch, overwrite.HasIfMatch = `"etag"`, true
	elsewhere := put("jobs/j/out/x", false)
	elsewhere.Bucket = "a-bucket-of-no-installation"
	cases := []struct {
		name    string
		extra   []map[string]any
		writes  []iamrec.RecordedWrite
		covered bool
		wantErr string
		loadErr string
	}{
		{name: "conditional writes under jobs/", writes: []iamrec.RecordedWrite{put("jobs/j/out/s/p000000/a1/part-00000", true), put("inputs/o/a.txt", false)}, covered: true},
		{name: "a plain write under jobs/", writes: []iamrec.RecordedWrite{put("jobs/j/plan/s.json", false)},
			wantErr: `PutObject s3://<data bucket>/jobs/j/plan/s.json (1 requests; If-None-Match "" present false; as role:ExecRole) is denied by the bucket policy's statement 1`},
		{name: "an If-Match overwrite under jobs/", writes: []iamrec.RecordedWrite{overwrite}, wantErr: "jobs/j/manifest.json"},
		{name: "a multipart step cannot carry the header", writes: []iamrec.RecordedWrite{put("jobs/j/x", true), part}, covered: true},
		{name: "other buckets are not the policy's", writes: []iamrec.RecordedWrite{put("jobs/j/x", true), elsewhere}, covered: true},
		{name: "the spared roles tag and delete under jobs/", writes: []iamrec.RecordedWrite{put("jobs/j/x", true),
			write(iamrec.FnExecutor, "PutObjectTagging", "s3:PutObjectTagging", "jobs/j/out/x", false, false),
			write(iamrec.FnAPI, "DeleteObjects", "s3:DeleteObject", "jobs/j/out/x", false, false)}, covered: true},
		{name: "a role the policy does not spare writes under jobs/", writes: []iamrec.RecordedWrite{write(iamrec.FnSweep, "PutObject", "s3:PutObject", "jobs/j/plan/s.json", true, true)},
			wantErr: "as role:SweepRole) is denied by the bucket policy's statement 2"},
		{name: "or tags there", writes: []iamrec.RecordedWrite{write(iamrec.FnSweep, "PutObjectTagging", "s3:PutObjectTagging", "jobs/j/out/x", false, false)},
			wantErr: "sweep PutObjectTagging s3://<data bucket>/jobs/j/out/x"},
		{name: "but may write elsewhere", writes: []iamrec.RecordedWrite{write(iamrec.FnSweep, "PutObject", "s3:PutObject", "inputs/o/a.txt", true, false)}},
		{name: "a function the template does not deploy", writes: []iamrec.RecordedWrite{write(iamrec.FnClaim, "PutObjectTagging", "s3:PutObjectTagging", "jobs/j/out/x", false, false)},
			wantErr: "as function claim, which the template does not deploy"},
		{name: "an untagged write is the installation's", writes: []iamrec.RecordedWrite{write("", "PutObject", "s3:PutObject", "jobs/j/x", true, true)}, covered: true},
		{name: "a full run must write under every write-once statement", writes: []iamrec.RecordedWrite{put("inputs/o/a.txt", false)}, covered: true,
			wantErr: "no recorded object-creating write falls under"},
		{name: "a partial run need not", writes: []iamrec.RecordedWrite{put("inputs/o/a.txt", false)}},
		{name: "an unknown condition is not evaluated", extra: []map[string]any{{"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
			"Resource":  map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{"B", "Arn"}}, "/x/*"}}},
			"Condition": map[string]any{"StringNotEquals": map[string]any{"s3:if-none-match": "*"}}}}, loadErr: "condition operator StringNotEquals is not evaluated here"},
		{name: "an Allow is not modelled", extra: []map[string]any{{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
			"Resource": map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{"B", "Arn"}}, "/*"}}}}}, loadErr: "only Deny statements are checked here"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pol, err := loadBucketPolicy(writeOnceTemplate(t, c.extra...))
			if c.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.loadErr) {
					t.Fatalf("load: %v, want an error containing %q", err, c.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = checkWriteOnce(pol, c.writes, c.covered)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("check: %v, want none", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("check: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestIAMGlob(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"jobs/*", "jobs/j/out/s/p000000/a1/part-00000", true},
		{"jobs/*", "inputs/o/jobs/x", false},
		{"jobs/*/plan/*", "jobs/j/plan/s.json", true},
		{"jobs/*/plan/*", "jobs/j/manifest.json", false},
		{"jobs/*/out/*", "jobs/j/out/s/p000000/a1/part-00000", true},
		{"jobs/*/out/*", "jobs/j/manifests/out.json", false},
		{"*", "", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*/manifest*", "jobs/j/manifest.000001.json", true},
		{"exact", "exact", true},
		{"exact", "exact/", false},
	} {
		if got := iamGlob(c.pattern, c.s); got != c.want {
			t.Errorf("iamGlob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}
