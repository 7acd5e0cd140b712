package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// Input version pinning (shared/blob/versions.go): on a versioned input
// bucket, the planner reads the bucket's versioning and lists the planned
// prefix's versions, and the executors read the planned version of each
// object, which S3 authorizes by s3:GetObjectVersion (not s3:GetObject).
// All of it is on the inputs area and the allowed input buckets only:
// published folders (outputs/*), the other input a job may name, are
// written once and never read by version.
var (
	versionListActions = []string{"s3:ListBucketVersions"}
	versioningActions  = []string{"s3:GetBucketVersioning"}
	versionReadActions = []string{"s3:GetObjectVersion"}
)

// grantVersionListing lets a planner pin input versions: the versioning of
// the data bucket and the allowed input buckets (a bucket setting, which
// takes no s3:prefix), and their version listings, limited on the data
// bucket to the inputs area as its s3:ListBucket is. An allowed input
// bucket is listed whole, as with s3:ListBucket: the operator shares it
// whole.
func (b *Batchwork) grantVersionListing(to awsiam.IGrantable) {
	buckets := []*string{b.Bucket.BucketArn()}
	var inputs []*string
	for _, in := range b.inputBuckets {
		inputs = append(inputs, jsii.String(inputBucketArn(in)))
	}
	buckets = append(buckets, inputs...)
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(versioningActions...), ResourceArns: &buckets})
	to.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(versionListActions...), Resources: &[]*string{b.Bucket.BucketArn()},
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": []string{inputKeys}}},
	}))
	if len(inputs) > 0 {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(versionListActions...), ResourceArns: &inputs})
	}
}

// grantVersionReads lets an executor read a pinned input version.
func (b *Batchwork) grantVersionReads(to awsiam.IGrantable) {
	reads := []*string{b.Bucket.ArnForObjects(jsii.String(inputKeys))}
	for _, in := range b.inputBuckets {
		reads = append(reads, jsii.String(inputBucketArn(in)+"/*"))
	}
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{Grantee: to, Actions: jsii.Strings(versionReadActions...), ResourceArns: &reads})
}
