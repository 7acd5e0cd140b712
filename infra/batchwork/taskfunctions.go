package batchwork

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// invokeActions are what an executor needs to run a lambda stage: a
// synchronous invocation of the stage's function
// (internal/executor/lambdatask.go), on Props.TaskFunctions only.
var invokeActions = []string{"lambda:InvokeFunction"}

// taskFunctionArns are the resources of the invoke grant: each function's
// ARN (a bare name is a function of the stack's account and region), and
// the same with ":*" for its versions and aliases, which IAM names
// separately.
func taskFunctionArns(functions []string) []*string {
	var out []*string
	for _, f := range functions {
		arn := f
		if !strings.HasPrefix(f, "arn:") {
			arn = "arn:" + *awscdk.Aws_PARTITION() + ":lambda:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":function:" + f
		}
		out = append(out, jsii.String(arn), jsii.String(arn+":*"))
	}
	return out
}
