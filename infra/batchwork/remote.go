package batchwork

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// The claim and commit functions serve executors that run outside the
// installation and have no table access of their own. Any principal that
// may invoke them can claim any owner's task, which fences the executor
// running it and spends an attempt: so they are deployed only for named
// remote executors' roles (Props.RemoteExecutorRoleArns), and each
// function's resource policy allows exactly those roles to invoke it.

// roleArnPattern is an IAM role ARN without wildcards: a policy naming a
// wildcard would let every matching role (in any account) invoke.
var roleArnPattern = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)

// CheckRoleArn says why arn cannot name a remote executor's role, or
// returns nil. A token (a role of the same app) is resolved at deploy time
// and taken as it is.
func CheckRoleArn(arn string) error {
	if *awscdk.Token_IsUnresolved(jsii.String(arn)) || roleArnPattern.MatchString(arn) {
		return nil
	}
	return fmt.Errorf("%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", arn)
}

// checkRemoteExecutors panics, as the construct does on every bad prop.
func checkRemoteExecutors(arns []string) {
	for _, arn := range arns {
		if err := CheckRoleArn(arn); err != nil {
			panic("batchwork: remoteExecutorRoleArns: " + err.Error())
		}
	}
}

// functionNames are the functions p deploys, in a fixed order (logical
// ids and the dashboard do not depend on map order).
func functionNames(p Props) []string {
	if len(p.RemoteExecutorRoleArns) == 0 {
		return []string{FnAPI, FnSweep, FnExecutor}
	}
	return []string{FnAPI, FnClaim, FnCommit, FnSweep, FnExecutor}
}

// allowRemoteExecutors lets exactly the remote executors' roles invoke
// fn, through its resource policy: a same-account role needs no policy of
// its own, and a role in another account gets in only through this.
func allowRemoteExecutors(fn awslambda.Function, arns []string) {
	for i, arn := range arns {
		fn.AddPermission(jsii.String("RemoteExecutor"+strconv.Itoa(i)), &awslambda.Permission{
			Principal: awsiam.NewArnPrincipal(jsii.String(arn)),
			Action:    jsii.String("lambda:InvokeFunction"),
		})
	}
}
