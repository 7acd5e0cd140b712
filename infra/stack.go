package main

import (
	"fmt"
	"github.com/batchwork/batchwork/examples"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/infra/batchwork"
	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/principal"
)

// StackName reads the stackName context parameter (default
// template.StackName), so several installations can share an account.
func StackName(get func(string) any) string {
	if s, ok := get("stackName").(string); ok && s != "" {
		return s
	}
	return template.StackName
}

// NewStack is the default stack: environment-agnostic, so the same
// template deploys to any account and region (and to the emulator). name
// is normally template.StackName.
func NewStack(scope constructs.Construct, name string, props *batchwork.Props) awscdk.Stack {
	stack := awscdk.NewStack(scope, jsii.String(name), &awscdk.StackProps{
		Description: jsii.String("Batchwork: serverless batch processing (DynamoDB, SQS, S3, Lambda)"),
	})
	if props.TaskNames == nil && props.ExecutorPackage == "" {
		// The repository's own executors run the examples
		// (functions/executor, cmd/batchwork-executor): the API accepts
		// their names from the first submit, before any executor has
		// started and published them.
		withNames := *props
		withNames.TaskNames = examples.Names()
		props = &withNames
	}
	batchwork.NewBatchwork(stack, "Batchwork", props)
	return stack
}

// PropsFromContext reads the context parameters; get returns nil for an
// unset key. Values from -c arrive as strings, values from cdk.json may be
// numbers.
func PropsFromContext(get func(string) any) (*batchwork.Props, error) {
	p := &batchwork.Props{}
	str := func(k string) (string, bool) {
		switch v := get(k).(type) {
		case nil:
			return "", false
		case string:
			return v, true
		default:
			return fmt.Sprint(v), true
		}
	}
	num := func(k string, dst *int, lo, hi int) error {
		s, ok := str(k)
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("context %s: %q is not a whole number between %d and %d", k, s, lo, hi)
		}
		*dst = n
		return nil
	}
	if s, ok := str("executor"); ok {
		switch k := batchwork.ExecutorKind(s); k {
		case batchwork.ExecutorLambda, batchwork.ExecutorFargate, batchwork.ExecutorBoth:
			p.Executor = k
		default:
			return nil, fmt.Errorf("context executor: %q: want lambda, fargate or both", s)
		}
	}
	if s, ok := str("sweepSchedule"); ok {
		p.SweepSchedule = s
	}
	if err := num("executorMaxConcurrency", &p.ExecutorMaxConcurrency, 2, 1000); err != nil {
		return nil, err
	}
	if err := num("fargateMaxTasks", &p.FargateMaxTasks, 1, 1000); err != nil {
		return nil, err
	}
	// Capacity settings (capacity.go): their ranges depend on each other,
	// so the construct checks them beyond whole and non-negative.
	for key, dst := range map[string]*int{
		"apiRateLimit": &p.APIRateLimit, "apiBurstLimit": &p.APIBurstLimit,
		"tableWarmReadUnitsPerSecond": &p.TableWarmReadUnitsPerSecond, "tableWarmWriteUnitsPerSecond": &p.TableWarmWriteUnitsPerSecond,
		"executorReservedConcurrency": &p.ExecutorReservedConcurrency,
	} {
		if err := num(key, dst, 0, batchwork.MaxCapacitySetting); err != nil {
			return nil, err
		}
	}
	var retentionDays int
	if err := num("retentionDays", &retentionDays, 0, 36500); err != nil {
		return nil, err
	}
	p.Retention = time.Duration(retentionDays) * 24 * time.Hour // the construct checks it is at least 8 days
	if s, ok := str("ownerMaxConcurrency"); ok {
		if _, err := control.ParseOwnerLimits(s); err != nil {
			return nil, fmt.Errorf("context ownerMaxConcurrency: %w", err)
		}
		p.OwnerMaxConcurrency = s
	}
	for key, to := range map[string]*string{
		"ownerMode": &p.OwnerMode, "maxActiveJobs": &p.MaxActiveJobs, "maxTasks": &p.MaxTasks,
		"maxSchedules": &p.MaxSchedules, "highPriorityOwners": &p.HighPriorityOwners,
	} {
		if s, ok := str(key); ok {
			*to = s
		}
	}
	if s, ok := str("inputBuckets"); ok {
		buckets, err := control.ParseInputBuckets(s)
		if err != nil {
			return nil, fmt.Errorf("context inputBuckets: %w", err)
		}
		p.InputBuckets = buckets
	}
	if s, ok := str("outputBuckets"); ok {
		// Bucket names, read as the input buckets are.
		buckets, err := control.ParseInputBuckets(s)
		if err != nil {
			return nil, fmt.Errorf("context outputBuckets: %w", err)
		}
		p.OutputBuckets = buckets
	}
	if s, ok := str("taskFunctions"); ok {
		fns, err := control.ParseTaskFunctions(s)
		if err != nil {
			return nil, fmt.Errorf("context taskFunctions: %w", err)
		}
		p.TaskFunctions = fns
	}
	if s, ok := str("executorSizes"); ok {
		// Checked here so a bad size is an error naming the context key,
		// not the construct's panic.
		if _, err := control.ParseExecutorSizes(s); err != nil {
			return nil, fmt.Errorf("context executorSizes: %w", err)
		}
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				p.ExecutorSizes = append(p.ExecutorSizes, f)
			}
		}
	}
	if s, ok := str("taskFunctionRoles"); ok {
		for _, arn := range strings.Split(s, ",") {
			arn = strings.TrimSpace(arn)
			if err := batchwork.CheckRoleArn(arn); err != nil {
				return nil, fmt.Errorf("context taskFunctionRoles: %w", err)
			}
			p.TaskFunctionRoleArns = append(p.TaskFunctionRoleArns, arn)
		}
	}
	if s, ok := str("remoteExecutorRoles"); ok {
		for _, arn := range strings.Split(s, ",") {
			arn = strings.TrimSpace(arn)
			if err := batchwork.CheckRoleArn(arn); err != nil {
				return nil, fmt.Errorf("context remoteExecutorRoles: %w", err)
			}
			p.RemoteExecutorRoleArns = append(p.RemoteExecutorRoleArns, arn)
		}
	}
	if _, err := principal.ParseMode(p.OwnerMode); err != nil {
		return nil, fmt.Errorf("context ownerMode: %w", err)
	}
	for key, v := range map[string]string{"maxActiveJobs": p.MaxActiveJobs, "maxTasks": p.MaxTasks, "maxSchedules": p.MaxSchedules} {
		if _, err := control.ParseOwnerQuota(v); err != nil {
			return nil, fmt.Errorf("context %s: %w", key, err)
		}
	}
	return p, nil
}
