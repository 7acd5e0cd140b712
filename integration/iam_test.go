package integration

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/provision"
)

// The emulator enforces no IAM, so a role that lacks an action passes
// every other test and fails only on AWS. This file proves the roles of
// the synthesized template (infra/template) against the code: every env's
// AWS clients record the IAM action of each request and the function whose
// code path made it (iamrec; the runner tags its handlers' contexts), and
// after the whole run checkIAM requires, per function, that
//   - every action used is granted to that function's role, on that
//     resource, and
//   - every action granted to it was used by it (least privilege), but for
//     the few grants iamExemptions explains.

// iamRec records the actions of every env (newEnv installs it).
var iamRec = iamrec.New()

// iamNames maps the physical names of every env's resources (table and
// bucket names, queue URLs) to the template outputs that name them.
var iamNames = struct {
	sync.Mutex
	output map[string]string
	// inputBuckets are operator-allowed input buckets (envOptions.inputBuckets).
	inputBuckets map[string]bool
}{output: map[string]string{}, inputBuckets: map[string]bool{}}

// noteIAMInputBucket records a bucket an env allows inputs from. The
// construct grants every allowed bucket to exactly the roles, and for
// exactly the actions, it grants the data bucket's inputs area
// (infra/batchwork TestInputBucketsAreGrantedLikeTheInputsArea), so the
// default template, which allows none, is checked with each request on an
// allowed bucket counted as the same request on the inputs area.
func noteIAMInputBucket(name string) {
	iamNames.Lock()
	defer iamNames.Unlock()
	iamNames.inputBuckets[name] = true
}

// noteIAMResources records an env's resources, so checkIAM can tell which
// template resource a recorded request acted on.
func noteIAMResources(r provision.Resources) {
	iamNames.Lock()
	defer iamNames.Unlock()
	for name, out := range map[string]string{
		r.Table: template.OutTable, r.Bucket: template.OutBucket,
		r.Queues.High: template.OutQueueHigh, r.Queues.Normal: template.OutQueueNormal, r.Queues.Low: template.OutQueueLow,
		r.Queues.DLQ: template.OutDLQ, r.Queues.Timer: template.OutTimerQueue,
		r.EventBus: template.OutEventBus,
	} {
		if name != "" {
			iamNames.output[name] = out
		}
	}
	// A size's ready queue (an env told to run sizes) is a copy of the
	// normal one, polled by the runner's executor, which runs every size:
	// its requests count as on the ready queues. The construct's grants
	// on the sized queues of a stack with ExecutorSizes are proven by the
	// template tests (infra/batchwork executorsizes_test.go).
	for _, url := range r.Queues.Sized {
		iamNames.output[url] = template.OutQueueNormal
	}
}

// iamExemption is a grant no code of ours performs, with the reason the
// role still needs it.
type iamExemption struct {
	// action is an IAM action, or a service prefix ending in ":".
	action string
	// eventSource limits the exemption to queues that are an event source
	// of the function.
	eventSource bool
	// function and target, when set, limit the exemption to that
	// function's grant on that target.
	function, target string
	reason           string
}

var iamExemptions = []iamExemption{
	{action: "logs:", reason: "the Lambda runtime writes the function's logs to its log group with its role; the only CloudWatch Logs call of ours is the api's " +
		"logs:FilterLogEvents on the stack's log groups (GET /jobs/{id}/logs), made on AWS only: the local runner reads its log file instead"},
	{action: "sqs:GetQueueAttributes", eventSource: true,
		reason: "Lambda's poller (the event source mapping) reads the queue's attributes with the function's role, which AWS requires of an SQS event source; " +
			"the runner, which stands in for the poller, does not need them"},
	// The api ends a job only when all of a root stage's tasks commit
	// before the stage is marked materialized (stages.go: materialize
	// completes the stage itself then), a race no test forces; publishing
	// the job's outputs then needs what the other publishers use.
	{action: "s3:PutObject", function: "api", target: "bucket/outputs/*", reason: "the api publishes a job's outputs only when it wins the race to complete its last stage"},
	{action: "s3:GetObject", function: "api", target: "bucket/outputs/*/_batchwork.json", reason: "the api reads a folder's claim only when it wins the race to complete a job's last stage"},
	{action: "s3:GetObject", function: "api", target: "bucket/outputs/*/_SUCCESS", reason: "the api reads a folder's success marker only when it wins the race to complete a job's last stage"},
}

func (x iamExemption) covers(fn string, g iamGrant, eventSources map[string]bool) bool {
	if x.function != "" && (x.function != fn || x.target != g.target) {
		return false
	}
	if strings.HasSuffix(x.action, ":") {
		if !strings.HasPrefix(g.action, x.action) {
			return false
		}
	} else if g.action != x.action {
		return false
	}
	return !x.eventSource || eventSources[g.target]
}

// iamGrant is an action on a target: a class of the template's resources,
// as the roles name them ("table", "table/index/due", "bucket",
// "bucket/*", "bucket/jobs/*", "queue:ready", "queue:dlq", "queue:timer",
// "logs:<id>", "bus"), with a listing's s3:prefix condition after a '?'
// ("bucket?prefix=jobs/*"). A recorded request's target names the object
// or prefix it acted on ("bucket/jobs/j1/plan/s.json",
// "bucket?prefix=inputs/k/"), and a grant covers it as IAM would (see
// covers).
type iamGrant struct{ action, target string }

// covers reports whether a grant's target covers a request's target: the
// same target; a pattern with '*' that matches it as IAM matches a
// resource ('*' spans any characters, '/' included: "bucket/outputs/*/_SUCCESS"
// covers "bucket/outputs/k/a/b/_SUCCESS"); or a bucket granted without
// condition, which covers every listing of it.
func covers(grant, use string) bool {
	switch {
	case grant == use:
		return true
	case strings.Contains(grant, "*"):
		return wildcardMatch(grant, use)
	case !strings.ContainsAny(grant, "/?"):
		return strings.HasPrefix(use, grant+"?prefix=")
	}
	return false
}

// wildcardMatch matches s against pattern, where '*' is any run of
// characters.
func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// targetBase is the resource class of a target ("bucket" of
// "bucket/jobs/*" and of "bucket?prefix=jobs/*").
func targetBase(target string) string {
	if i := strings.IndexAny(target, "/?"); i >= 0 {
		return target[:i]
	}
	return target
}

// iamRoles is what the template grants each function.
type iamRoles struct {
	grants map[string]map[iamGrant]bool // function -> grants
	// eventSources are the targets each function has an event source
	// mapping on.
	eventSources map[string]map[string]bool
	// targetOf maps a template output (template.Out*) to its target.
	targetOf map[string]string
}

type cfnResource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

// cfnTemplate is the part of a synthesized template the checks read.
type cfnTemplate struct {
	Resources map[string]cfnResource `json:"Resources"`
	Outputs   map[string]struct {
		Value any `json:"Value"`
	} `json:"Outputs"`
}

func parseTemplate(raw []byte) (cfnTemplate, error) {
	var t cfnTemplate
	if err := json.Unmarshal(raw, &t); err != nil {
		return cfnTemplate{}, fmt.Errorf("parse template: %w", err)
	}
	return t, nil
}

// loadIAMRoles reads the functions' roles out of a synthesized template.
func loadIAMRoles(raw []byte) (iamRoles, error) {
	t, err := parseTemplate(raw)
	if err != nil {
		return iamRoles{}, err
	}
	// The three ready queues are one target: which one a task goes to is
	// its priority, and each role must treat them alike.
	queueClass := map[string]string{
		template.OutQueueHigh: "queue:ready", template.OutQueueNormal: "queue:ready", template.OutQueueLow: "queue:ready",
		template.OutDLQ: "queue:dlq", template.OutTimerQueue: "queue:timer",
		// The data bucket; the access log bucket is a class of its own.
		template.OutBucket: "bucket",
	}
	rs := iamRoles{grants: map[string]map[iamGrant]bool{}, eventSources: map[string]map[string]bool{}, targetOf: map[string]string{}}
	classOf := map[string]string{} // logical id -> target
	members := map[string]int{}    // target -> logical ids
	for id, r := range t.Resources {
		switch r.Type {
		case "AWS::DynamoDB::Table":
			classOf[id] = "table"
		case "AWS::S3::Bucket":
			classOf[id] = "bucket:" + id // unless an output classes it below
		case "AWS::Logs::LogGroup":
			classOf[id] = "logs:" + id
		case "AWS::SQS::Queue":
			classOf[id] = "queue:" + id // unless an output classes it below
		case "AWS::Events::EventBus":
			classOf[id] = "bus" // Batchwork's events (shared/events)
		}
	}
	for key, o := range t.Outputs {
		id := refID(o.Value)
		if _, ok := classOf[id]; !ok {
			continue
		}
		if c, ok := queueClass[key]; ok {
			classOf[id] = c
		}
		rs.targetOf[key] = classOf[id]
	}
	for _, c := range classOf {
		members[c]++
	}
	// resolve turns a statement's resource into targets and the logical
	// id each names.
	resolve := func(v any) (target, id string, err error) {
		if id = refID(v); id != "" {
			if c, ok := classOf[id]; ok {
				return c, id, nil
			}
			return "", "", fmt.Errorf("resource %v: not a table, bucket, queue or log group", v)
		}
		// {"Fn::Join": ["", [{"Fn::GetAtt": [id, "Arn"]}, "/suffix"]]}
		if m, ok := v.(map[string]any); ok {
			if j, ok := m["Fn::Join"].([]any); ok && len(j) == 2 && j[0] == "" {
				if parts, ok := j[1].([]any); ok && len(parts) == 2 {
					suffix, _ := parts[1].(string)
					if id = refID(parts[0]); id != "" && classOf[id] != "" && suffix != "" {
						return classOf[id] + suffix, id, nil
					}
				}
			}
		}
		return "", "", fmt.Errorf("resource %v: not understood; a wildcard or an ARN built another way must be checked here", v)
	}
	roles := map[string]string{} // role id -> function
	for id, r := range t.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		desc, _ := r.Properties["Description"].(string)
		fn, ok := strings.CutPrefix(desc, "Batchwork ")
		if !ok {
			return iamRoles{}, fmt.Errorf("function %s: description %q does not name it (want \"Batchwork <name>\")", id, desc)
		}
		role := refID(r.Properties["Role"])
		if other, ok := roles[role]; ok {
			return iamRoles{}, fmt.Errorf("functions %s and %s share role %s", other, fn, role)
		}
		roles[role] = fn
		rs.grants[fn] = map[iamGrant]bool{}
		rs.eventSources[fn] = map[string]bool{}
	}
	fnIDs := map[string]string{} // function logical id -> name
	for id, r := range t.Resources {
		if r.Type == "AWS::Lambda::Function" {
			fnIDs[id] = roles[refID(r.Properties["Role"])]
		}
	}
	var errs []error
	// How many of a target's resources grant each (function, action): a
	// grant on some ready queues only is an error.
	perID := map[string]map[iamGrant]map[string]bool{}
	for pid, r := range t.Resources {
		switch r.Type {
		case "AWS::Lambda::EventSourceMapping":
			fn := fnIDs[refID(r.Properties["FunctionName"])]
			if c, ok := classOf[refID(r.Properties["EventSourceArn"])]; ok && fn != "" {
				rs.eventSources[fn][c] = true
			}
			continue
		case "AWS::IAM::Policy":
		default:
			continue
		}
		rlist, _ := r.Properties["Roles"].([]any)
		var fns []string
		for _, ref := range rlist {
			if fn, ok := roles[refID(ref)]; ok {
				fns = append(fns, fn)
			}
		}
		if len(fns) == 0 {
			continue // not a function's role (the Fargate task role, CDK's helpers)
		}
		doc, _ := r.Properties["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		for _, s := range stmts {
			st, _ := s.(map[string]any)
			if st["Effect"] != "Allow" {
				errs = append(errs, fmt.Errorf("policy %s: a %v statement; only Allow is checked here", pid, st["Effect"]))
				continue
			}
			if st["Action"] == nil || st["Resource"] == nil {
				errs = append(errs, fmt.Errorf("policy %s: statement %v: only Action on Resource, without NotAction or NotResource, is checked here", pid, st))
				continue
			}
			prefixes, err := listPrefixes(st)
			if err != nil {
				errs = append(errs, fmt.Errorf("policy %s: %w", pid, err))
				continue
			}
			for _, a := range asList(st["Action"]) {
				action, _ := a.(string)
				for _, res := range asList(st["Resource"]) {
					base, id, err := resolve(res)
					if err != nil {
						errs = append(errs, fmt.Errorf("policy %s, %s: %w", pid, action, err))
						continue
					}
					targets := []string{base}
					if prefixes != nil {
						targets = targets[:0]
						for _, p := range prefixes {
							targets = append(targets, base+"?prefix="+p)
						}
					}
					for _, target := range targets {
						for _, fn := range fns {
							if perID[fn] == nil {
								perID[fn] = map[iamGrant]map[string]bool{}
							}
							g := iamGrant{action, target}
							if perID[fn][g] == nil {
								perID[fn][g] = map[string]bool{}
							}
							perID[fn][g][id] = true
						}
					}
				}
			}
		}
	}
	for fn, gs := range perID {
		for g, ids := range gs {
			if base := targetBase(g.target); len(ids) != members[base] {
				errs = append(errs, fmt.Errorf("%s: %s granted on %d of the %d %s resources", fn, g.action, len(ids), members[base], base))
				continue
			}
			rs.grants[fn][g] = true
		}
	}
	return rs, errors.Join(errs...)
}

// listPrefixes reads the one condition the roles use: s3:ListBucket (or
// s3:ListBucketVersions) limited to prefixes, {"StringLike": {"s3:prefix": [...]}}. It returns
// nil for a statement without a condition, and an error for any other.
func listPrefixes(st map[string]any) ([]string, error) {
	c, ok := st["Condition"]
	if !ok {
		return nil, nil
	}
	acts := asList(st["Action"])
	cond, _ := c.(map[string]any)
	like, _ := cond["StringLike"].(map[string]any)
	// ListBucketVersions (version pinning) takes s3:prefix as ListBucket does.
	listing := len(acts) == 1 && (acts[0] == "s3:ListBucket" || acts[0] == "s3:ListBucketVersions")
	if !listing || len(cond) != 1 || len(like) != 1 || like["s3:prefix"] == nil {
		return nil, fmt.Errorf("statement %v: the only condition checked here is s3:ListBucket or s3:ListBucketVersions with StringLike s3:prefix", st)
	}
	var out []string
	for _, p := range asList(like["s3:prefix"]) {
		ps, _ := p.(string)
		if ps == "" || strings.Contains(strings.TrimSuffix(ps, "*"), "*") || strings.Contains(ps, "?") {
			return nil, fmt.Errorf("statement %v: s3:prefix %v: only a literal prefix, optionally ending in *, is checked here", st, p)
		}
		out = append(out, ps)
	}
	return out, nil
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// refID returns X of {"Ref": X} or {"Fn::GetAtt": [X, ...]}.
func refID(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if a, ok := m["Fn::GetAtt"].([]any); ok && len(a) > 0 {
		s, _ := a[0].(string)
		return s
	}
	return ""
}

// target is the template target a recorded request acted on, or a
// description of a resource no template output names (never granted).
func (rs iamRoles) target(r iamrec.Resource) string {
	iamNames.Lock()
	out, ok := iamNames.output[r.Name]
	input := iamNames.inputBuckets[r.Name]
	iamNames.Unlock()
	key := r.Key
	if input && !ok && (r.Kind == iamrec.KindObject || r.Kind == iamrec.KindBucket) {
		// An operator's input bucket, counted as the inputs area (see
		// noteIAMInputBucket).
		out, ok = template.OutBucket, true
		key = "inputs/(allowed bucket " + r.Name + ")/" + key
	}
	base := rs.targetOf[out]
	if !ok || base == "" {
		return "unknown " + r.String()
	}
	switch r.Kind {
	case iamrec.KindIndex:
		return base + "/index/" + r.Index
	case iamrec.KindObject:
		return base + "/" + key
	case iamrec.KindBucket:
		if key != "" {
			return base + "?prefix=" + key
		}
	}
	return base
}

// shortTarget cuts a request's target after its first path segment, so a
// report groups the requests on one area ("bucket/inputs/…",
// "bucket?prefix=uploads/…") instead of listing every key.
func shortTarget(target string) string {
	i := strings.IndexAny(target, "/?")
	if i < 0 || strings.HasPrefix(target, "unknown ") {
		return target
	}
	head, rest := target[:i+1], target[i+1:]
	if strings.HasPrefix(rest, "prefix=") {
		head, rest = head+"prefix=", strings.TrimPrefix(rest, "prefix=")
	}
	if seg, _, ok := strings.Cut(rest, "/"); ok {
		return head + seg + "/…"
	}
	return head + rest
}

// iamRow is one line of the per-function report.
type iamRow struct {
	fn string
	iamGrant
	requests int
	status   string // "ok", "NOT GRANTED", "UNUSED", or "exempt: ..."
}

// checkIAM compares the recorded uses with the template's grants. Unused
// grants are only reported when checkUnused is set: after a partial run
// (-run) or a failed one, a grant may be unused only because its test did
// not run.
func checkIAM(rs iamRoles, uses map[iamrec.Use]int, checkUnused bool) ([]iamRow, error) {
	// Requests are counted against the grant that covers them (the most
	// specific one, when several do), and those no grant covers against
	// their own target, cut to its first path segment ("bucket/inputs/…").
	used := map[string]map[iamGrant]int{}   // function -> covering grant -> requests
	denied := map[string]map[iamGrant]int{} // function -> uncovered target -> requests
	for u, n := range uses {
		fn, target := u.Function, rs.target(u.Resource)
		var best *iamGrant
		for g := range rs.grants[fn] {
			if g.action == u.Action.Action && covers(g.target, target) && (best == nil || len(g.target) > len(best.target)) {
				best = &g
			}
		}
		m := used
		g := iamGrant{u.Action.Action, target}
		if best != nil {
			g = *best
		} else {
			m, g.target = denied, shortTarget(target)
		}
		if m[fn] == nil {
			m[fn] = map[iamGrant]int{}
		}
		m[fn][g] += n
	}
	var rows []iamRow
	var errs []error
	for fn, gs := range denied {
		if _, ok := rs.grants[fn]; !ok {
			errs = append(errs, fmt.Errorf("requests attributed to %q, which is no function of the template", fn))
			continue
		}
		for g, n := range gs {
			rows = append(rows, iamRow{fn: fn, iamGrant: g, requests: n, status: "NOT GRANTED"})
			errs = append(errs, fmt.Errorf("%s performs %s on %s (%d requests), which its role does not grant", fn, g.action, g.target, n))
		}
	}
	for fn, gs := range used {
		for g, n := range gs {
			rows = append(rows, iamRow{fn: fn, iamGrant: g, requests: n, status: "ok"})
		}
	}
	for fn, gs := range rs.grants {
		for g := range gs {
			if _, ok := used[fn][g]; ok {
				continue
			}
			row := iamRow{fn: fn, iamGrant: g, status: "UNUSED"}
			for _, x := range iamExemptions {
				if x.covers(fn, g, rs.eventSources[fn]) {
					row.status = "exempt: " + x.reason
				}
			}
			if row.status == "UNUSED" {
				if !checkUnused {
					row.status = "unused (not checked: partial or failed run)"
				} else {
					errs = append(errs, fmt.Errorf("%s's role grants %s on %s, which no test saw it use: remove the grant, or exercise it in a test", fn, g.action, g.target))
				}
			}
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.fn != b.fn {
			return a.fn < b.fn
		}
		if a.action != b.action {
			return a.action < b.action
		}
		return a.target < b.target
	})
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return rows, errors.Join(errs...)
}

func printIAMRows(w io.Writer, rows []iamRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "function\taction\ton\trequests\tstatus")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.fn, r.action, r.target, r.requests, r.status)
	}
	_ = tw.Flush()
}

// fullRun reports whether every test of the package was selected.
func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// iamMain runs the check after the package's tests (TestMain): it prints
// the per-function table in verbose mode, and on a failed check the
// failures and the table, and returns whether the check passed.
func iamMain(w io.Writer, verbose, testsPassed bool) bool {
	checkUnused := testsPassed && fullRun()
	ok := true
	for _, tm := range iamTemplates { // iam_templates_test.go
		rs, err := loadIAMRoles(tm.raw)
		if err != nil {
			fmt.Fprintf(w, "--- FAIL: IAM check of %s: %v\n", tm.name, err)
			ok = false
			continue
		}
		rows, err := checkIAM(rs, tm.uses(rs, iamRec.Uses()), checkUnused)
		what := "roles of " + tm.name + " against the actions the code performed"
		if err != nil {
			fmt.Fprintf(w, "--- FAIL: IAM check (%s)\n%v\n", what, err)
			printIAMRows(w, rows)
			ok = false
			continue
		}
		if verbose {
			note := ""
			if !checkUnused {
				note = "; unused grants not checked: partial or failed run"
			}
			fmt.Fprintf(w, "--- PASS: IAM check (%s%s)\n", what, note)
			printIAMRows(w, rows)
		}
	}
	return ok
}

// iamUnitTemplate is a minimal template for TestIAMCheck: a sweep function
// whose role reads the table, sends to the ready queues and (for its
// event source on the high queue) reads their attributes. sendOn lists
// the ready queues SendMessage is granted on.
func iamUnitTemplate(t *testing.T, sendOn ...string) []byte {
	t.Helper()
	arn := func(id string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }
	var send []any
	for _, q := range sendOn {
		send = append(send, arn(q))
	}
	tmpl := map[string]any{
		"Resources": map[string]any{
			"T": map[string]any{"Type": "AWS::DynamoDB::Table"},
			"H": map[string]any{"Type": "AWS::SQS::Queue"}, "N": map[string]any{"Type": "AWS::SQS::Queue"}, "L": map[string]any{"Type": "AWS::SQS::Queue"},
			"F": map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{"Description": "Batchwork sweep", "Role": arn("R")}},
			"M": map[string]any{"Type": "AWS::Lambda::EventSourceMapping", "Properties": map[string]any{"FunctionName": map[string]any{"Ref": "F"}, "EventSourceArn": arn("H")}},
			"P": map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
				"Roles": []any{map[string]any{"Ref": "R"}},
				"PolicyDocument": map[string]any{"Statement": []any{
					map[string]any{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": arn("T")},
					map[string]any{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": send},
					map[string]any{"Effect": "Allow", "Action": []any{"sqs:GetQueueAttributes"}, "Resource": []any{arn("H"), arn("N"), arn("L")}},
				}},
			}},
		},
		"Outputs": map[string]any{
			template.OutTable: map[string]any{"Value": map[string]any{"Ref": "T"}}, template.OutQueueHigh: map[string]any{"Value": map[string]any{"Ref": "H"}},
			template.OutQueueNormal: map[string]any{"Value": map[string]any{"Ref": "N"}}, template.OutQueueLow: map[string]any{"Value": map[string]any{"Ref": "L"}},
		},
	}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The check itself: an action used but not granted fails, and so does a
// grant never used (unless the run was partial), a grant on some ready
// queues only, and a request on a resource of no installation; the event
// source's GetQueueAttributes is exempt.
func TestIAMCheck(t *testing.T) {
	t.Parallel()
	noteIAMResources(provision.Resources{Table: "iam-unit-table", Queues: control.Queues{High: "iam-unit-high", Normal: "iam-unit-normal", Low: "iam-unit-low"}})
	use := func(action, kind, name string) iamrec.Use {
		return iamrec.Use{Function: iamrec.FnSweep, Action: iamrec.Action{Action: action, Resource: iamrec.Resource{Kind: kind, Name: name}}}
	}
	get, send := use("dynamodb:GetItem", iamrec.KindTable, "iam-unit-table"), use("sqs:SendMessage", iamrec.KindQueue, "iam-unit-low")
	all := []string{"H", "N", "L"}
	cases := []struct {
		name        string
		sendOn      []string
		uses        []iamrec.Use
		checkUnused bool
		wantErr     string // "" for none
	}{
		{"every grant used", all, []iamrec.Use{get, send}, true, ""},
		{"used but not granted", all, []iamrec.Use{get, send, use("dynamodb:PutItem", iamrec.KindTable, "iam-unit-table")}, true,
			"sweep performs dynamodb:PutItem on table (1 requests), which its role does not grant"},
		{"granted but not used", all, []iamrec.Use{get}, true, "sweep's role grants sqs:SendMessage on queue:ready, which no test saw it use"},
		{"unused grants not checked after a partial run", all, []iamrec.Use{get}, false, ""},
		{"a resource of no installation", all, []iamrec.Use{get, send, use("dynamodb:GetItem", iamrec.KindTable, "elsewhere")}, true,
			"sweep performs dynamodb:GetItem on unknown table:elsewhere"},
		{"granted on some ready queues only", []string{"H"}, []iamrec.Use{get, send}, true, "sqs:SendMessage granted on 1 of the 3 queue:ready resources"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			uses := map[iamrec.Use]int{}
			for _, u := range c.uses {
				uses[u]++
			}
			rs, err := loadIAMRoles(iamUnitTemplate(t, c.sendOn...))
			if err == nil {
				_, err = checkIAM(rs, uses, c.checkUnused)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("check: %v, want none", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("check: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// iamS3UnitTemplate is a minimal template for TestIAMCheckOfAreas: an
// executor function whose role reads the bucket's jobs area, writes any
// object, and lists the jobs and inputs areas only.
func iamS3UnitTemplate(t *testing.T) []byte {
	t.Helper()
	arn := func(id string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }
	objects := func(suffix string) map[string]any {
		return map[string]any{"Fn::Join": []any{"", []any{arn("D"), suffix}}}
	}
	tmpl := map[string]any{
		"Resources": map[string]any{
			"D": map[string]any{"Type": "AWS::S3::Bucket"},
			"F": map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{"Description": "Batchwork executor", "Role": arn("R")}},
			"P": map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
				"Roles": []any{map[string]any{"Ref": "R"}},
				"PolicyDocument": map[string]any{"Statement": []any{
					map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": objects("/jobs/*")},
					map[string]any{"Effect": "Allow", "Action": "s3:PutObject", "Resource": objects("/*")},
					map[string]any{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": arn("D"),
						"Condition": map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"jobs/*", "inputs/*"}}}},
				}},
			}},
		},
		"Outputs": map[string]any{template.OutBucket: map[string]any{"Value": map[string]any{"Ref": "D"}}},
	}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The check of S3 areas: an object action is granted on the key patterns
// of its grants, a listing on the prefixes of its grant's s3:prefix
// condition, and a request on an operator's input bucket counts as one on
// the inputs area.
func TestIAMCheckOfAreas(t *testing.T) {
	t.Parallel()
	const bucket, allowed = "iam-unit-data", "iam-unit-allowed"
	noteIAMResources(provision.Resources{Bucket: bucket})
	noteIAMInputBucket(allowed)
	use := func(action, kind, name, key string) iamrec.Use {
		return iamrec.Use{Function: iamrec.FnExecutor, Action: iamrec.Action{Action: action, Resource: iamrec.Resource{Kind: kind, Name: name, Key: key}}}
	}
	get := func(key string) iamrec.Use { return use("s3:GetObject", iamrec.KindObject, bucket, key) }
	put := use("s3:PutObject", iamrec.KindObject, bucket, "jobs/j1/out/s/p000000/a1/part-00000")
	list := func(b, prefix string) iamrec.Use { return use("s3:ListBucket", iamrec.KindBucket, b, prefix) }
	every := []iamrec.Use{get("jobs/j1/plan/s.json"), put, list(bucket, "jobs/j1/out/"), list(bucket, "inputs/k/corpus/")}
	cases := []struct {
		name    string
		uses    []iamrec.Use
		wantErr string // "" for none
	}{
		{"every grant used", every, ""},
		{"a read outside the granted area", append(every, get("inputs/k/a.txt")),
			"executor performs s3:GetObject on bucket/inputs/… (1 requests), which its role does not grant"},
		{"a listing outside the granted prefixes", append(every, list(bucket, "uploads/x/")),
			"executor performs s3:ListBucket on bucket?prefix=uploads/… (1 requests), which its role does not grant"},
		{"a listing of the whole bucket", append(every, list(bucket, "")),
			"executor performs s3:ListBucket on bucket (1 requests), which its role does not grant"},
		{"a listing of an allowed input bucket is one of the inputs area", append(every, list(allowed, "data/")), ""},
		{"a read of an allowed input bucket is one of the inputs area", append(every, use("s3:GetObject", iamrec.KindObject, allowed, "data/a.txt")),
			"executor performs s3:GetObject on bucket/inputs/… (1 requests), which its role does not grant"},
		{"a granted prefix never listed", every[:3], "executor's role grants s3:ListBucket on bucket?prefix=inputs/*, which no test saw it use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			uses := map[iamrec.Use]int{}
			for _, u := range c.uses {
				uses[u]++
			}
			rs, err := loadIAMRoles(iamS3UnitTemplate(t))
			if err == nil {
				_, err = checkIAM(rs, uses, true)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("check: %v, want none", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("check: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}
