// Package provision gives the local runner and the integration tests the
// same table, queues and bucket as a deployed stack: it deploys the
// data-plane resources of the synthesized CDK template (infra/template)
// with CloudFormation, one stack per installation, and reads their names
// back from the stack. There is no second list of resources here: which
// resources are deployed is decided by resource type, and how they are
// configured is the template's business.
//
// When DynamoDB is served by another endpoint than CloudFormation (the
// emulator's DynamoDB Local beside moto), CloudFormation would create the
// table where no DynamoDB client looks, so the template's tables are
// created on the DynamoDB endpoint directly, from their template
// properties, and the stack holds the rest (table.go).
package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// Resources names what a Batchwork installation uses.
type Resources struct {
	Table  string
	Bucket string
	Queues control.Queues
	// EventBus is the EventBridge bus events are put on (shared/events);
	// empty for a stack deployed before it had one.
	EventBus string
}

// Settings is kept for callers of Create; the queues' visibility timeout
// and redrive count now come from the template, which derives them from
// shared/tuning.
type Settings struct {
	// ExecutorSizes are the executor sizes the installation runs; each
	// beyond the default gets a ready queue of its own (sizedqueues.go).
	ExecutorSizes []spec.Size
}

// DefaultSettings deploys the template as synthesized.
var DefaultSettings = Settings{}

// DataPlaneTypes are the resource types a local installation deploys:
// state, queues, data and the policies on them. Functions, the API, the
// schedule and the alarms are left out because the local runner hosts the
// handlers itself.
var DataPlaneTypes = map[string]bool{
	"AWS::DynamoDB::Table":  true,
	"AWS::SQS::Queue":       true,
	"AWS::SQS::QueuePolicy": true,
	"AWS::S3::Bucket":       true,
	"AWS::S3::BucketPolicy": true,
	// The bus the runner puts Batchwork's events on (shared/events).
	"AWS::Events::EventBus": true,
}

// ErrNotDeployed means the stack does not exist.
var ErrNotDeployed = errors.New("stack not deployed")

// Create deploys the data plane of the default template as the stack
// named prefix and returns its resources; the tables go straight to the
// DynamoDB endpoint when it is not CloudFormation's (see the package
// documentation). A stack or table that already exists is reused, so
// Create is idempotent.
func Create(ctx context.Context, cfg aws.Config, s3opt func(*s3.Options), prefix string, set Settings) (Resources, error) {
	body, err := DataPlane(template.JSON)
	if err != nil {
		return Resources{}, err
	}
	if body, err = withSizedQueues(body, set.ExecutorSizes); err != nil { // sizedqueues.go
		return Resources{}, err
	}
	if dynamoApart(cfg) {
		// Tables first: once the stack exists, its outputs name them.
		tables, rest, err := splitTables(body, prefix)
		if err != nil {
			return Resources{}, err
		}
		db := dynamodb.NewFromConfig(cfg)
		for _, t := range tables {
			if err := createTable(ctx, db, t); err != nil {
				return Resources{}, fmt.Errorf("stack %s: %w", prefix, err)
			}
		}
		body = rest
	}
	cf := cloudformation.NewFromConfig(cfg)
	_, err = cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:    aws.String(prefix),
		TemplateBody: aws.String(string(body)),
		OnFailure:    cftypes.OnFailureDelete,
		Tags:         []cftypes.Tag{{Key: aws.String("batchwork:local"), Value: aws.String("true")}},
	})
	var exists *cftypes.AlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return Resources{}, fmt.Errorf("create stack %s: %w", prefix, err)
	}
	r, err := FromStack(ctx, cfg, prefix)
	if err != nil {
		return r, err
	}
	// The bucket is the one resource a client addresses by host or path;
	// check it answers with the client options the runner will use.
	if _, err := s3.NewFromConfig(cfg, s3opt).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &r.Bucket}); err != nil {
		return r, fmt.Errorf("stack %s: bucket %s: %w", prefix, r.Bucket, err)
	}
	return r, nil
}

// DataPlane returns the part of a CloudFormation template that holds the
// DataPlaneTypes resources and the outputs that refer only to them.
func DataPlane(full []byte) ([]byte, error) {
	var t struct {
		Resources map[string]struct {
			Type string `json:"Type"`
		} `json:"Resources"`
		Outputs map[string]json.RawMessage `json:"Outputs"`
	}
	if err := json.Unmarshal(full, &t); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	var raw struct {
		Resources map[string]json.RawMessage `json:"Resources"`
	}
	if err := json.Unmarshal(full, &raw); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	out := map[string]any{"AWSTemplateFormatVersion": "2010-09-09", "Description": "Batchwork data plane (local)"}
	res := map[string]json.RawMessage{}
	for id, r := range t.Resources {
		if DataPlaneTypes[r.Type] {
			res[id] = raw.Resources[id]
		}
	}
	if len(res) == 0 {
		return nil, errors.New("template has no data-plane resources (run `make synth`)")
	}
	if err := dropOutsideStatements(res, t.Resources); err != nil {
		return nil, err
	}
	for id := range res {
		for _, ref := range refs(res[id]) {
			if _, ok := res[ref]; !ok && !strings.HasPrefix(ref, "AWS::") {
				return nil, fmt.Errorf("template: %s refers to %s, which is not a data-plane resource", id, ref)
			}
		}
	}
	outs := map[string]json.RawMessage{}
	for k, v := range t.Outputs {
		keep := true
		for _, ref := range refs(v) {
			if _, ok := res[ref]; !ok && !strings.HasPrefix(ref, "AWS::") {
				keep = false
			}
		}
		if keep {
			outs[k] = v
		}
	}
	out["Resources"] = res
	out["Outputs"] = outs
	return json.Marshal(out)
}

// resourcePolicies are the data-plane types that hold a policy document
// whose statements may name principals outside the data plane.
var resourcePolicies = map[string]bool{"AWS::S3::BucketPolicy": true, "AWS::SQS::QueuePolicy": true}

// dropOutsideStatements removes from the data plane's resource policies
// the statements that refer to resources it does not deploy (the data
// bucket's names the handlers' roles: only they change the job area), and
// a policy left with no statement. Locally the runner hosts the handlers
// and the emulator enforces no resource policy, so such a statement has
// nothing to name; the template tests (infra/batchwork) prove it.
func dropOutsideStatements(res map[string]json.RawMessage, types map[string]struct {
	Type string `json:"Type"`
}) error {
	for id, raw := range res {
		if !resourcePolicies[types[id].Type] {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("parse %s: %w", id, err)
		}
		props, _ := r["Properties"].(map[string]any)
		doc, _ := props["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		kept := []any{}
		for _, st := range stmts {
			b, err := json.Marshal(st)
			if err != nil {
				return err
			}
			inside := true
			for _, ref := range refs(b) {
				if _, ok := res[ref]; !ok && !strings.HasPrefix(ref, "AWS::") {
					inside = false
				}
			}
			if inside {
				kept = append(kept, st)
			}
		}
		if len(kept) == len(stmts) {
			continue
		}
		if len(kept) == 0 {
			delete(res, id)
			continue
		}
		doc["Statement"] = kept
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		res[id] = b
	}
	return nil
}

// refs lists the logical ids a template fragment refers to through Ref,
// Fn::GetAtt and Fn::Sub.
func refs(fragment json.RawMessage) []string {
	var v any
	if json.Unmarshal(fragment, &v) != nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "Ref":
					if s, ok := e.(string); ok {
						seen[s] = true
					}
				case "Fn::GetAtt":
					if a, ok := e.([]any); ok && len(a) > 0 {
						if s, ok := a[0].(string); ok {
							seen[s] = true
						}
					}
				case "Fn::Sub":
					s, _ := e.(string)
					if a, ok := e.([]any); ok && len(a) > 0 {
						s, _ = a[0].(string)
					}
					for _, part := range strings.Split(s, "${")[1:] {
						name, _, _ := strings.Cut(part, "}")
						name, _, _ = strings.Cut(name, ".")
						seen[name] = true
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// FromStack reads a deployed stack's resources (a local data-plane stack,
// or a full `cdk deploy`): from its outputs, and where an output is
// missing, from the physical id of the resource the output refers to in
// the stack's template (moto does not set the outputs of a stack created
// through a change set, which is how the CDK CLI deploys).
func FromStack(ctx context.Context, cfg aws.Config, stack string) (Resources, error) {
	cf := cloudformation.NewFromConfig(cfg)
	st, err := waitStack(ctx, cf, stack)
	if err != nil {
		return Resources{}, err
	}
	got := map[string]string{}
	for _, o := range st.Outputs {
		got[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	var tmpl struct {
		Outputs map[string]struct {
			Value json.RawMessage `json:"Value"`
		} `json:"Outputs"`
	}
	needTemplate := false
	for _, k := range resourceOutputs {
		if got[k] == "" {
			needTemplate = true
		}
	}
	if needTemplate {
		t, err := cf.GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: &stack})
		if err != nil {
			return Resources{}, fmt.Errorf("stack %s: get template: %w", stack, err)
		}
		if err := json.Unmarshal([]byte(aws.ToString(t.TemplateBody)), &tmpl); err != nil {
			return Resources{}, fmt.Errorf("stack %s: parse template: %w", stack, err)
		}
	}
	var physical map[string]string
	for _, k := range resourceOutputs {
		if got[k] != "" {
			continue
		}
		o, ok := tmpl.Outputs[k]
		if !ok && optionalOutputs[k] {
			continue
		}
		var ref struct {
			Ref string `json:"Ref"`
		}
		if !ok || json.Unmarshal(o.Value, &ref) != nil || ref.Ref == "" {
			if optionalOutputs[k] {
				continue // e.g. the bus's name, an attribute, not a Ref
			}
			return Resources{}, fmt.Errorf("stack %s: no output %s", stack, k)
		}
		if physical == nil {
			// DescribeStackResources, not the singular call, which moto
			// answers with a 500.
			d, err := cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: &stack})
			if err != nil {
				return Resources{}, fmt.Errorf("stack %s: describe resources: %w", stack, err)
			}
			physical = map[string]string{}
			for _, r := range d.StackResources {
				physical[aws.ToString(r.LogicalResourceId)] = aws.ToString(r.PhysicalResourceId)
			}
		}
		if got[k] = physical[ref.Ref]; got[k] == "" {
			return Resources{}, fmt.Errorf("stack %s: output %s: resource %s has no physical id", stack, k, ref.Ref)
		}
	}
	return Resources{
		Table: got[template.OutTable], Bucket: got[template.OutBucket],
		Queues: control.Queues{
			High: got[template.OutQueueHigh], Normal: got[template.OutQueueNormal],
			Low: got[template.OutQueueLow], DLQ: got[template.OutDLQ],
			Timer: got[template.OutTimerQueue],
			Sized: sizedQueues(got), // sizedqueues.go
		},
		EventBus: got[template.OutEventBus],
	}, nil
}

// resourceOutputs are the outputs a Resources is read from.
var resourceOutputs = []string{
	template.OutTable, template.OutBucket, template.OutQueueHigh,
	template.OutQueueNormal, template.OutQueueLow, template.OutDLQ,
	template.OutTimerQueue, template.OutEventBus,
}

// optionalOutputs are resourceOutputs a stack deployed by an earlier
// version lacks; its Resources leave them empty.
var optionalOutputs = map[string]bool{template.OutEventBus: true}

// waitStack waits until the stack's creation or update has finished and
// fails unless it succeeded. On the emulator CreateStack is synchronous,
// so the first look usually finds it complete.
func waitStack(ctx context.Context, cf *cloudformation.Client, stack string) (cftypes.Stack, error) {
	delay := 100 * time.Millisecond
	for {
		out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: &stack})
		if err != nil {
			if strings.Contains(err.Error(), "does not exist") {
				return cftypes.Stack{}, fmt.Errorf("stack %s: %w", stack, ErrNotDeployed)
			}
			return cftypes.Stack{}, fmt.Errorf("describe stack %s: %w", stack, err)
		}
		if len(out.Stacks) == 0 {
			return cftypes.Stack{}, fmt.Errorf("stack %s: %w", stack, ErrNotDeployed)
		}
		st := out.Stacks[0]
		status := string(st.StackStatus)
		switch {
		case status == "CREATE_COMPLETE" || status == "UPDATE_COMPLETE":
			return st, nil
		case strings.HasSuffix(status, "_IN_PROGRESS") || status == "CREATE_PENDING":
		default:
			return st, fmt.Errorf("stack %s is %s: %s", stack, status, aws.ToString(st.StackStatusReason))
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("stack %s still %s: %w", stack, status, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
