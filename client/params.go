package client

import (
	"maps"
	"net/url"
	"slices"
)

// paramsQuery adds run parameters to q as param=NAME=VALUE, in name order
// (so a request is the same on every retry); nil q makes a new one.
func paramsQuery(q url.Values, params map[string]string) url.Values {
	if len(params) == 0 {
		return q
	}
	if q == nil {
		q = url.Values{}
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		q.Add("param", k+"="+params[k])
	}
	return q
}
