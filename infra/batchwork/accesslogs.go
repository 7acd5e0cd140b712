package batchwork

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// accessLogDays is how long the data bucket's access logs are kept: as
// long as the API's access logs.
const accessLogDays = 90

// accessLogPrefix is where the data bucket's logs go in the log bucket.
const accessLogPrefix = "data/"

// useBucketPolicyForAccessLogs lets log delivery into the log bucket
// through its bucket policy, not an ACL: the buckets' ACLs are disabled
// (BucketOwnerEnforced), and CDK grants log delivery by ACL unless this
// feature flag is on. Set on the construct before it has children, so it
// holds for its buckets whatever the app's own context says.
func useBucketPolicyForAccessLogs(c constructs.Construct) {
	c.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)
}

// accessLogBucket is the bucket that receives the data bucket's S3 server
// access logs. Users upload inputs with their own credentials and fetch
// outputs through presigned URLs, so the API's and the functions' logs do
// not see that access; the bucket's access logs do. Log delivery writes
// only with S3-managed keys, and CDK lets it in through this bucket's
// policy (its ACLs are disabled), for the data bucket only. It is kept
// when the stack goes, as the data it describes is.
func accessLogBucket(c constructs.Construct) awss3.Bucket {
	return awss3.NewBucket(c, jsii.String("AccessLogs"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:         jsii.String("expire-access-logs"),
			Expiration: awscdk.Duration_Days(jsii.Number(accessLogDays)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
}
