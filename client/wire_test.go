package client_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/logs"
)

// The client's types carry every field the API sends, under the same
// names and in the same order: an answer with every field set decodes
// into the client's type (no field unknown) and encodes back to the same
// bytes. The batchwork command prints these types with -o json, so its
// output is the API's.
func TestTypesMatchTheAPIs(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]any{
		{control.SubmitResult{}, client.SubmitResult{}},
		{control.JobStatus{}, client.JobStatus{}},
		{control.JobList{}, client.JobList{}},
		{control.TaskList{}, client.TaskList{}},
		{control.History{}, client.History{}},
		{control.OutputList{}, client.OutputList{}},
		{control.BadRecordPage{}, client.BadRecordPage{}},
		{logs.Page{}, client.LogPage{}},
		{control.Identity{}, client.Identity{}},
		{control.JobDeletion{}, client.JobDeletion{}},
		{control.DataDeletion{}, client.DataDeletion{}},
		{control.ScheduleView{}, client.Schedule{}},
		{control.ScheduleList{}, client.ScheduleList{}},
		{control.RunList{}, client.RunList{}},
		{control.TaskCancellation{}, client.TaskCancellation{}},
	} {
		server := reflect.New(reflect.TypeOf(pair[0]))
		fill(server.Elem())
		want, err := json.Marshal(server.Interface())
		if err != nil {
			t.Fatal(err)
		}
		mine := reflect.New(reflect.TypeOf(pair[1]))
		dec := json.NewDecoder(bytes.NewReader(want))
		dec.DisallowUnknownFields()
		if err := dec.Decode(mine.Interface()); err != nil {
			t.Errorf("%T: %v", pair[1], err)
			continue
		}
		got, _ := json.Marshal(mine.Interface())
		if !bytes.Equal(got, want) {
			t.Errorf("%T encodes\n %s\nthe API's %T\n %s", pair[1], got, pair[0], want)
		}
	}
}

// fill sets every exported field of v, through pointers, slices and maps,
// to a value that is not its zero value.
func fill(v reflect.Value) {
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"k":1}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	}
}

// Every route of the API has a method of the client: a route added
// without one fails here, so the client (and the command built on it)
// cannot fall behind the API.
func TestEveryRouteHasAMethod(t *testing.T) {
	t.Parallel()
	methods := map[string]string{
		"POST /jobs":                  "Submit",
		"GET /jobs":                   "ListJobs",
		"GET /jobs/{id}":              "Status",
		"DELETE /jobs/{id}":           "DeleteJob",
		"GET /jobs/{id}/tasks":        "ListTasks",
		"GET /jobs/{id}/history":      "ListHistory",
		"POST /jobs/{id}/cancel":      "Cancel",
		"GET /jobs/{id}/manifest":     "ListOutputs",
		"GET /jobs/{id}/bad-records":  "ListBadRecords",
		"GET /jobs/{id}/logs":         "ListLogs",
		"POST /jobs/{id}/redrive":     "Redrive",
		"POST /jobs/{id}/rerun":       "Rerun",
		"DELETE /jobs/{id}/data":      "DeleteData",
		"GET /whoami":                 "WhoAmI",
		"POST /schedules":             "CreateSchedule",
		"GET /schedules":              "ListSchedules",
		"GET /schedules/{id}":         "GetSchedule",
		"POST /schedules/{id}/pause":  "PauseSchedule",
		"POST /schedules/{id}/resume": "ResumeSchedule",
		"DELETE /schedules/{id}":      "DeleteSchedule",
		"GET /schedules/{id}/runs":    "ListScheduleRuns",
		"GET /openapi.yaml":           "", // the document, not an operation
	}
	ct := reflect.TypeOf(&client.Client{})
	for _, r := range api.Routes {
		name, ok := methods[r.Method+" "+r.Path]
		if !ok {
			t.Errorf("route %s %s has no method of client.Client", r.Method, r.Path)
			continue
		}
		if _, ok := ct.MethodByName(name); name != "" && !ok {
			t.Errorf("route %s %s: client.Client has no method %s", r.Method, r.Path, name)
		}
	}
}
