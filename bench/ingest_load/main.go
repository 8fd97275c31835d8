// The load generator of bench/ingest.py: POSTs request bodies to an OpenLineage endpoint and times each answer.
//
//	ingest_load -url http://127.0.0.1:PORT/api/v1/lineage -bodies FILE -c 32 [-rate R]
//
// FILE holds one request body per line (a JSON event or a JSON array of events; JSON has no raw newline). -c
// requests are in flight at once over keep-alive connections. With -rate (requests/s) the requests are paced
// (open loop): each is due at start + i/rate, and its answer time is counted from when it was due, so a stalled
// receiver is not hidden by the requests that waited behind it. Prints one JSON object:
// {"requests", "seconds", "statuses": {"201": n, ...}, "failed", "latencies_ms": [...]}.
//
// It is Go so that the client's own cost per request (tens of microseconds) takes little of the two cores the
// receiver and the broker share with it; bench/ingest.py also runs the aiohttp client for comparison.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "endpoint")
	file := flag.String("bodies", "", "file of request bodies, one a line")
	c := flag.Int("c", 32, "requests in flight")
	rate := flag.Float64("rate", 0, "requests per second (0: as fast as answered)")
	flag.Parse()
	bodies := readBodies(*file)
	tr := &http.Transport{MaxIdleConnsPerHost: *c, MaxConnsPerHost: *c, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	latencies := make([]float64, len(bodies))
	var next, failed atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				due := time.Now()
				if *rate > 0 {
					due = start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				}
				req, _ := http.NewRequest("POST", *url, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				latencies[i] = float64(time.Since(due).Microseconds()) / 1000
				mu.Lock()
				statuses[strconv.Itoa(resp.StatusCode)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out, _ := json.Marshal(map[string]any{"requests": len(bodies), "seconds": time.Since(start).Seconds(),
		"statuses": statuses, "failed": failed.Load(), "latencies_ms": latencies})
	fmt.Println(string(out))
}

func readBodies(path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	var bodies [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		bodies = append(bodies, append([]byte(nil), sc.Bytes()...))
	}
	return bodies
}
