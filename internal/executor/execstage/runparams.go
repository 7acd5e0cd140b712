package execstage

import (
	"encoding/json"
	"maps"
	"slices"
)

// A job's run parameters (spec.Job.RunParams) reach its programs as
// EnvRunParams, a JSON object, and each as EnvRunParamPrefix + its name
// as the spec spells it (names are already [A-Za-z_][A-Za-z0-9_]*, and
// values hold no NUL: spec.Job.Resolve refuses one). They are apart from
// the partition's parameters (EnvTaskParams, EnvTaskParamPrefix), whose
// upper-cased names could otherwise meet them.
const (
	EnvRunParams      = "BATCHWORK_RUN_PARAMS"
	EnvRunParamPrefix = "BATCHWORK_RUN_PARAM_"
)

func runParamsEnv(p map[string]string) []string {
	if p == nil {
		p = map[string]string{}
	}
	b, _ := json.Marshal(p)
	env := []string{EnvRunParams + "=" + string(b)}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		env = append(env, EnvRunParamPrefix+k+"="+p[k])
	}
	return env
}
