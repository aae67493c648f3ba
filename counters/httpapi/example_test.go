package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/vkcounter/vkcounter/counters"
	"github.com/vkcounter/vkcounter/counters/httpapi"
)

func ExampleHandler() {
	h, err := httpapi.New(counters.MemoryStores(nil), httpapi.Options{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, r := range []struct{ method, path, body string }{
		{"POST", "/counters/access/pages", ""},
		{"GET", "/counters/access/pages", ""},
		{"GET", "/counters/access/never", ""},
		{"POST", "/counters/participants/room/visit", `{"key":"alice","timeout":300}`},
		{"GET", "/counters/participants/room?timeout=300", ""},
		{"POST", "/counters/participants/room/leave", `{"key":""}`},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	// Output:
	// 200 {"name":"pages","total":1}
	// 200 {"name":"pages","total":1}
	// 404 {"error":"access: counter not found"}
	// 200 {"name":"room","key":"alice","active":1,"new":true}
	// 200 {"name":"room","active":1}
	// 400 {"error":"participant: invalid key: length 0, want 1 to 255 bytes"}
}
