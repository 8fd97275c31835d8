// A small HTTP backend for bench.delivery and the delivery tests: it takes OpenLineage events and DataHub
// proposals as fast as the machine lets it, keeps a count per event identity (so lost and duplicated
// events can be counted), can answer with an injected latency, and can be taken down and brought back.
//
//	receiver -addr 127.0.0.1:0 -control 127.0.0.1:0
//
// prints "listening <addr> control <addr>" on stdout once both listen.
//
//	receiver -blast http://127.0.0.1:PORT/api/v1/lineage -n 20000 -c 64
//
// is the load generator that measures a receiver's ceiling: it POSTs -n OpenLineage-shaped events of about
// 1.6 KB, -c at a time over keep-alive connections, and prints {"requests": n, "seconds": s, "per_s": r}.
//
// Backend (the address the service is pointed at):
//
//	POST /api/v1/lineage                           one OpenLineage event: counted by (run.runId, eventType, eventTime)
//	POST /aspects?action=ingestProposalBatch       DataHub GMS: {"proposals": [...]}, each counted by its bytes
//	GET  /config                                   DataHub GMS: {"noCode": "true", ...} (acryl-datahub's emitter checks it)
//	any other POST                                 counted as a request only
//
// Control (another port, never taken down):
//
//	GET  /stats                 {"requests", "events", "distinct", "duplicates", "proposals", "proposal_distinct",
//	                             "proposal_duplicates", "rejected", "up", "latency_ms", "order_violations"}
//	POST /latency?ms=5          answer every backend request after that many milliseconds
//	POST /down                  close the backend listener and its connections (connection refused)
//	POST /up                    listen again on the same address
//	POST /reset                 forget the counts
//	GET  /keys                  the OpenLineage events in arrival order, one "runId eventType eventTime" a line
//
// order_violations counts events of one run (run.runId) whose eventTime is earlier than that of an event of
// the same run that arrived before it, as a reordering would show.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type olEvent struct {
	EventType string `json:"eventType"`
	EventTime string `json:"eventTime"`
	Run       struct {
		RunID string `json:"runId"`
	} `json:"run"`
}

type state struct {
	mu         sync.Mutex
	seen       map[string]int
	order      []string
	lastTime   map[string]string
	violations int
	proposals  map[string]int
	nProposals int
	requests   atomic.Int64
	rejected   atomic.Int64
	latency    atomic.Int64 // nanoseconds
	up         atomic.Bool
	keepKeys   bool
}

func (s *state) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = map[string]int{}
	s.order = nil
	s.lastTime = map[string]string{}
	s.violations = 0
	s.proposals = map[string]int{}
	s.nProposals = 0
	s.requests.Store(0)
	s.rejected.Store(0)
}

func (s *state) backend(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/config" {
		// What acryl-datahub's DatahubRestEmitter asks GMS before it writes (it refuses a server without noCode).
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"noCode": "true", "versions": {"acryldata/datahub": {"version": "v1.3.0"}}}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost {
		s.rejected.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if d := s.latency.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	s.requests.Add(1)
	switch {
	case r.URL.Path == "/aspects" && r.URL.Query().Get("action") == "ingestProposalBatch":
		var batch struct {
			Proposals []json.RawMessage `json:"proposals"`
		}
		if err := json.Unmarshal(body, &batch); err != nil {
			s.rejected.Add(1)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for _, p := range batch.Proposals {
			s.proposals[string(p)]++
		}
		s.nProposals += len(batch.Proposals)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"value":[]}`)
		return
	case strings.HasSuffix(r.URL.Path, "/lineage"):
		var ev olEvent
		if err := json.Unmarshal(body, &ev); err != nil || ev.Run.RunID == "" {
			s.rejected.Add(1)
			http.Error(w, "expected an OpenLineage RunEvent", http.StatusBadRequest)
			return
		}
		key := ev.Run.RunID + " " + ev.EventType + " " + ev.EventTime
		run := ev.Run.RunID
		s.mu.Lock()
		s.seen[key]++
		if s.keepKeys {
			s.order = append(s.order, key)
		}
		if last, ok := s.lastTime[run]; ok && ev.EventTime < last && s.seen[key] == 1 {
			s.violations++
		}
		if ev.EventTime > s.lastTime[run] {
			s.lastTime[run] = ev.EventTime
		}
		s.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func (s *state) stats() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	events, dups := 0, 0
	for _, n := range s.seen {
		events += n
		dups += n - 1
	}
	pdups := 0
	for _, n := range s.proposals {
		pdups += n - 1
	}
	return map[string]any{
		"requests": s.requests.Load(), "events": events, "distinct": len(s.seen), "duplicates": dups,
		"proposals": s.nProposals, "proposal_distinct": len(s.proposals), "proposal_duplicates": pdups,
		"rejected": s.rejected.Load(), "up": s.up.Load(), "latency_ms": float64(s.latency.Load()) / 1e6,
		"order_violations": s.violations,
	}
}

func blast(url string, n, c int) {
	pad := strings.Repeat("x", 1500)
	tr := &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				body := fmt.Sprintf(`{"eventType":"START","eventTime":"2026-11-01T00:00:00.%06dZ","run":{"runId":"blast-%d"},"job":{"namespace":"blast","name":"j"},"pad":"%s"}`, i%1000000, i, pad)
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"requests": n, "failed": failed.Load(), "seconds": secs,
		"per_s": float64(n) / secs, "concurrency": c})
}

func main() {
	blastURL := flag.String("blast", "", "measure a receiver at this URL instead of being one")
	blastN := flag.Int("n", 20000, "requests of -blast")
	blastC := flag.Int("c", 64, "requests in flight of -blast")
	addr := flag.String("addr", "127.0.0.1:0", "backend address")
	control := flag.String("control", "127.0.0.1:0", "control address")
	latency := flag.Duration("latency", 0, "injected latency per backend request")
	keys := flag.Bool("keys", false, "keep the arrival order of OpenLineage events (GET /keys)")
	flag.Parse()
	if *blastURL != "" {
		blast(*blastURL, *blastN, *blastC)
		return
	}

	s := &state{keepKeys: *keys}
	s.reset()
	s.latency.Store(int64(*latency))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bound := ln.Addr().String()
	var mu sync.Mutex
	var srv *http.Server
	serve := func(l net.Listener) {
		mu.Lock()
		srv = &http.Server{Handler: http.HandlerFunc(s.backend)}
		cur := srv
		mu.Unlock()
		s.up.Store(true)
		cur.Serve(l)
	}
	go serve(ln)

	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.stats())
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		out := strings.Join(s.order, "\n")
		s.mu.Unlock()
		io.WriteString(w, out)
	})
	mux.HandleFunc("/latency", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.ParseFloat(r.URL.Query().Get("ms"), 64)
		if err != nil {
			http.Error(w, "expected ?ms=NUMBER", http.StatusBadRequest)
			return
		}
		s.latency.Store(int64(ms * 1e6))
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cur := srv
		mu.Unlock()
		if s.up.Swap(false) && cur != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 0)
			defer cancel()
			cur.Shutdown(ctx) // stop listening
			cur.Close()       // and drop every connection
		}
	})
	mux.HandleFunc("/up", func(w http.ResponseWriter, r *http.Request) {
		if s.up.Load() {
			return
		}
		l, err := net.Listen("tcp", bound)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		go serve(l)
		for !s.up.Load() {
			time.Sleep(time.Millisecond)
		}
	})
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) { s.reset() })
	cl, err := net.Listen("tcp", *control)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %s control %s\n", bound, cl.Addr().String())
	os.Stdout.Sync()
	http.Serve(cl, mux)
}
