package batchwork

import (
	"fmt"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/control"
)

// Owners are protected from each other by default (Props.OwnerMaxConcurrency,
// Props.HighPriorityOwners):
//
//   - each owner runs at most defaultOwnerCap tasks at once, half of what
//     the default executors run, so one owner's backlog leaves the other
//     half to the others;
//   - no owner may use priority "high" unless the operator names it
//     (control.NoHighPriorityOwners), so none can put its work ahead of
//     every other's.
//
// An operator may turn either off; synth then warns, naming the setting
// (ownerProtectionWarnings).

// defaultOwnerCap is half of the tasks the default executor runs at once:
// the Lambda executor's invocations on one ready queue (an invocation
// runs one owner's tasks), or the Fargate fleet's slots.
func defaultOwnerCap(p Props) int {
	n := p.ExecutorMaxConcurrency / 2
	if p.Executor == ExecutorFargate {
		n = p.FargateMaxTasks * p.FargateSlots / 2
	}
	return min(max(n, 1), control.MaxOwnerConcurrency)
}

// withOwnerProtection applies the defaults to p's owner settings.
func withOwnerProtection(p Props) Props {
	if p.OwnerMaxConcurrency == "" {
		p.OwnerMaxConcurrency = fmt.Sprintf("*=%d", defaultOwnerCap(p))
	}
	if len(control.ParseHighPriorityOwners(p.HighPriorityOwners)) == 0 {
		p.HighPriorityOwners = control.NoHighPriorityOwners
	}
	return p
}

// ownerProtectionWarnings warns, at synth, of each protection p turns off.
func ownerProtectionWarnings(c constructs.Construct, p Props) {
	warn := func(id, msg string) {
		awscdk.Annotations_Of(c).AddWarningV2(jsii.String("batchwork:"+id), jsii.String("batchwork: "+msg))
	}
	if limits, err := control.ParseOwnerLimits(p.OwnerMaxConcurrency); err == nil && limits.Default == 0 {
		warn("ownerMaxConcurrency", fmt.Sprintf("ownerMaxConcurrency %q sets no cap (*=<n>) for the owners it does not name: "+
			"any one of them can run tasks on every executor and hold the others' tasks back; the default is *=%d",
			p.OwnerMaxConcurrency, defaultOwnerCap(p)))
	}
	if slices.Contains(control.ParseHighPriorityOwners(p.HighPriorityOwners), "*") {
		warn("highPriorityOwners", `highPriorityOwners "*" lets every owner use priority "high" and put its tasks ahead of every other owner's; `+
			"the default is no owner: name the owners who may")
	}
}
