// Command infra is the default CDK app: one stack, "Batchwork", holding
// one Batchwork construct (infra/batchwork). cdk.json runs it; context
// parameters (cdk deploy -c key=value) configure it:
//
//	executor                lambda (default), fargate or both
//	sweepSchedule           an EventBridge schedule, default "rate(1 minute)"
//	executorMaxConcurrency  Lambda executor concurrency per ready queue, default 100
//	fargateMaxTasks         Fargate executor task limit, default 10
//	executorReservedConcurrency
//	                        concurrency reserved for each Lambda executor function, default 0 (unreserved);
//	                        else at least 3 × executorMaxConcurrency
//	apiRateLimit, apiBurstLimit
//	                        the HTTP API's throttle, requests a second and burst, default 250 and 500
//	tableWarmReadUnitsPerSecond, tableWarmWriteUnitsPerSecond
//	                        the table's warm throughput, units a second, default AWS's (12,000 and 4,000)
//	ownerMaxConcurrency     owners' concurrency limits, e.g. "*=200,arn:aws:iam::123456789012:role/etl=10";
//	                        default "*=<half the default executor's concurrency>" ("*=50"); "*=0" turns it off (synth warns)
//	ownerMode               "role" (default: a role's sessions are one owner) or "session"
//	maxActiveJobs, maxTasks, maxSchedules
//	                        owners' quotas, in the same format; default none
//	highPriorityOwners      owners allowed priority "high" (comma-separated ARNs; "*": all, synth warns); default none
//	remoteExecutorRoles     role ARNs (comma-separated) of executors outside the installation: deploys
//	                        the claim and commit functions, invokable by these roles only; default none
//	outputBuckets           buckets (comma-separated) that jobs may publish their outputs to, under each owner's key; default none
//	taskFunctions           Lambda functions (names or ARNs, comma-separated) that lambda stages may invoke; default none
//	taskFunctionRoles       those functions' execution roles (ARNs), allowed to write their attempts' outputs; default none
//	stackName               the stack's name, default Batchwork
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	get := func(k string) any { return app.Node().TryGetContext(jsii.String(k)) }
	props, err := PropsFromContext(get)
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	NewStack(app, StackName(get), props)
	app.Synth(nil)
}
