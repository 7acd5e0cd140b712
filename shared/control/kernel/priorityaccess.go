package kernel

// NoHighPriorityOwners is the allow-list of priority "high" that names no
// owner (Quotas.HighPriority, lambdaenv.EnvHighPriorityOwners): every
// owner's "high" job or stage is refused at submit, naming the field.
// The CDK construct deploys it when the operator names no owner, so that
// no owner can put its work ahead of every other's unless the operator
// says so. (An empty list means every owner, for runners without an
// operator, such as batchwork-local.) It matches no owner: the owners of
// a deployed installation are IAM principal ARNs (principal.Owner).
const NoHighPriorityOwners = "none"
