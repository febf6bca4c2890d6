// A local webhook receiver for bench/events/run: answers every POST 204 at
// once and appends, per event, its id, its type, the milliseconds from the
// event's `time` (set when the server made the event, just before its
// transaction commits) to its receipt, and the receipt's Unix time. Not a
// verifier (tests/events.rs and the cluster tests check signatures with
// `standardwebhooks`): here only speed counts, so it is Go's net/http, not
// Python's threads, that shares the two cores with the server under test.
//
//	go run receiver.go OUT_FILE   # prints its port on stdout's first line
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

type event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Time string `json:"time"`
}

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	out := bufio.NewWriter(f)
	var mu sync.Mutex
	// Lines reach the file within 50 ms: the bench counts them to know
	// when the backlog has drained.
	go func() {
		for range time.Tick(50 * time.Millisecond) {
			mu.Lock()
			out.Flush()
			mu.Unlock()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	handler := func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(http.StatusNoContent)
		var e event
		if json.Unmarshal(body, &e) != nil {
			return
		}
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			return
		}
		ms := float64(now.Sub(t).Microseconds()) / 1000
		mu.Lock()
		fmt.Fprintf(out, "%s %s %.3f %.6f\n", e.ID, e.Type, ms, float64(now.UnixMicro())/1e6)
		mu.Unlock()
	}
	panic(http.Serve(ln, http.HandlerFunc(handler)))
}
