package api

import "testing"

// publicOperations are the operations the API serves without credentials.
// There are none: on AWS the IAM authorizer guards every route, and the
// local runner asks its token on every path, this document included.
var publicOperations = map[string]bool{}

// No operation is documented as public (security: [] or an empty
// requirement) unless the API serves it without credentials.
func TestNoOperationDocumentedPublic(t *testing.T) {
	d, _ := loadDoc(t)
	if len(d.Security) == 0 {
		t.Fatal("the document declares no global security")
	}
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			if op.Security == nil || publicOperations[key] {
				continue
			}
			public := len(*op.Security) == 0
			for _, req := range *op.Security {
				public = public || len(req) == 0
			}
			if public {
				t.Errorf("%s is documented as public (security without a requirement), but every route needs the caller's credentials", key)
			}
		}
	}
}
