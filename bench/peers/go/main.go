// Go mime/multipart peer driver for bench/peers (stdlib only).
// usage: peers-go BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES
// Prints one key=value line (see bench/peers/README.md).
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func statusKiB(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}

func bestMs(reps int, f func()) float64 {
	best := math.Inf(1)
	for i := 0; i < reps; i++ {
		t := time.Now()
		f()
		best = math.Min(best, float64(time.Since(t).Nanoseconds())/1e6)
	}
	return best
}

func parse(body []byte, boundary string) (parts, n int64) {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return
		}
		if err != nil {
			fail("NextPart: %v", err)
		}
		parts++
		c, err := io.Copy(io.Discard, p)
		if err != nil {
			fail("part read: %v", err)
		}
		n += c
	}
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "go: "+f+"\n", a...)
	os.Exit(1)
}

func atoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fail("bad number %q", s)
	}
	return v
}

var sink int

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: peers-go BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES")
		os.Exit(2)
	}
	path, boundary := os.Args[1], os.Args[2]
	reps := int(atoi(os.Args[3]))
	wantParts, wantBytes := atoi(os.Args[4]), atoi(os.Args[5])

	body, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	rss0 := statusKiB("VmRSS:")

	var parts, n int64
	ms := bestMs(reps, func() { parts, n = parse(body, boundary) })
	hwm := statusKiB("VmHWM:")
	if parts != wantParts || n != wantBytes {
		fail("got parts=%d bytes=%d, want parts=%d bytes=%d", parts, n, wantParts, wantBytes)
	}

	// In-language baselines, same process, same bytes.
	delim := []byte("\r\n--" + boundary)
	hits := 0
	memmemMs := bestMs(reps, func() {
		hits = 0
		for b := body; ; {
			i := bytes.Index(b, delim)
			if i < 0 {
				break
			}
			hits++
			b = b[i+len(delim):]
		}
	})
	dst := make([]byte, len(body))
	memcpyMs := bestMs(reps, func() { sink += copy(dst, body) })

	fmt.Printf("ms=%.3f baseline_memmem_ms=%.3f memcpy_ms=%.3f parts=%d bytes=%d delims=%d rss_delta_kib=%d version=%s\n",
		ms, memmemMs, memcpyMs, parts, n, hits, max(hwm-rss0, 0), runtime.Version())
}
