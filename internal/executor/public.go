package executor

// PublicRegistry returns the registry behind a public task registry (a
// *batchwork.Registry from shared/batchwork), for the packages that take
// the public type and build Runners themselves (shared/runner). That
// package imports this one, so this one cannot name its type: it sets
// this function in its init, and any package that can hold a
// *batchwork.Registry has imported it, so the function is set by then.
// It returns nil for nil.
var PublicRegistry func(reg any) *Registry
