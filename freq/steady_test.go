package freq_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
	"github.com/vkcounter/vkcounter/internal/redistest"
)

// BenchmarkSteadyState measures what a deployment pays from its second day
// on, which a benchmark of the first hour never reaches: the buckets'
// purge runs first a window and a slack (30 h) after a bucket's first text.
// Each operation counts perDay messages a day, spread evenly over each
// simulated day (the scripts' clock argument, so days take seconds), for
// steadyDays days with the default 24 h window, each message with a
// dedupe key of its own (count.lua, as a Redis Cluster runs it); "texts"
// are all distinct, "hot" one text repeated. It reports, for the first
// day and the last one: the commands run inside the scripts per message
// (INFO commandstats, less what clients send), the purges per message
// (the scripts' HGETALLs: only a purge runs one) and Redis's CPU per
// message (used_cpu_sys + used_cpu_user) with the last day's ÷ the
// first's; and, at the end, the memory per text in the window of the
// buckets and lists (MEMORY USAGE summed: the real TTLs do not pass in
// simulated time, so this is the memory once the records expired, the
// dedupe hashes left out), the fields the buckets hold for texts that left
// the window, and used_memory's growth less the dedupe hashes, per text.
//
// The figures are server-wide: run it alone on a Redis server of one's own,
// once per figure (-benchtime=1x), e.g.
//
//	VKCOUNTER_TEST_REDIS=redis://127.0.0.1:29400/0 go test ./freq -run '^$' -bench SteadyState -benchtime=1x
func BenchmarkSteadyState(b *testing.B) {
	for _, perDay := range []int{20000, 100000} {
		b.Run("texts-"+strconv.Itoa(perDay), func(b *testing.B) { benchmarkSteady(b, perDay, false) })
	}
	b.Run("hot-20000", func(b *testing.B) { benchmarkSteady(b, 20000, true) })
}

// steadyDays is how many days BenchmarkSteadyState simulates: the
// buckets' first purges run on the second, the third is all steady.
const steadyDays = 3

func benchmarkSteady(b *testing.B, perDay int, hot bool) {
	tg := redistest.Open(b, redistest.Real)
	ctx := context.Background()
	s := newStore(b, tg, freq.Options{})
	if err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	prefix := strings.TrimSuffix(s.Keys("x")[1], "}e0")
	prefix = prefix[:strings.LastIndex(prefix, "{")]
	day := int64(freq.DefaultWindow / time.Second)
	for b.Loop() {
		mem0 := infoField(b, tg.Client, "memory", "used_memory")
		var first, last dayCost
		for d := range int64(steadyDays) {
			before := serverStats(b, tg.Client)
			countDay(b, s, d, day, perDay, hot)
			c := serverStats(b, tg.Client).since(before, perDay)
			if d == 0 {
				first = c
			}
			last = c
		}
		buckets, lists, fields, nBuckets := footprint(b, tg.Client, prefix)
		del(b, tg.Client, prefix+"{*}e[01]")
		grown := infoField(b, tg.Client, "memory", "used_memory") - mem0
		n := float64(perDay)
		b.ReportMetric(first.inner, "cmds/msg-day1")
		b.ReportMetric(last.inner, "cmds/msg-last")
		b.ReportMetric(first.purges, "purges/msg-day1")
		b.ReportMetric(last.purges, "purges/msg-last")
		b.ReportMetric(first.cpu, "cpu-µs/msg-day1")
		b.ReportMetric(last.cpu, "cpu-µs/msg-last")
		b.ReportMetric(last.cpu/first.cpu, "cpu-last/day1")
		b.ReportMetric(float64(buckets+lists)/n, "B/text-keys")
		b.ReportMetric(float64(grown)/n, "B/text-used")
		if !hot {
			// Every text of the last day is in the window, none before it.
			b.ReportMetric(float64(fields-2*nBuckets-int64(perDay))/n, "expired/text")
		}
		b.Logf("%d a day, hot %v: by command, first day %v; last %v", perDay, hot, first.by, last.by)
	}
}

// countDay counts perDay messages at even steps across day d (from base),
// from 8 goroutines: distinct texts, or one when hot.
func countDay(b *testing.B, s *freq.Store, d, day int64, perDay int, hot bool) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(perDay); i = next.Add(1) - 1 {
				text := "hot"
				if !hot {
					text = "text " + strconv.FormatInt(d, 10) + " " + strconv.FormatInt(i, 10)
				}
				at := sec(d*day + i*day/int64(perDay))
				if _, err := s.CountAt(context.Background(), text, "m"+strconv.FormatInt(d*int64(perDay)+i, 10), at); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// clientCommands are the commands clients send (the benchmark, go-redis's
// connection setup), not scripts.
var clientCommands = map[string]bool{"evalsha": true, "eval": true, "info": true, "hello": true, "client": true,
	"ping": true, "select": true, "script": true, "memory": true, "scan": true}

// A stats is what INFO says at one moment: each command's calls and the
// server's CPU seconds.
type stats struct {
	calls map[string]int64
	cpu   float64
}

// A dayCost is one simulated day's cost per message.
type dayCost struct {
	inner, purges, cpu float64
	by                 map[string]float64 // inner commands per message, by name
}

// serverStats reads the calls of every command and the CPU seconds.
func serverStats(b testing.TB, c redis.UniversalClient) stats {
	st := stats{calls: map[string]int64{}}
	info := c.Info(context.Background(), "commandstats", "cpu").Val()
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if name, rest, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, "cmdstat_") {
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			st.calls[strings.TrimPrefix(name, "cmdstat_")] = n
		} else if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, _ := strconv.ParseFloat(rest, 64)
			st.cpu += f
		}
	}
	if len(st.calls) == 0 {
		b.Fatalf("no commandstats in INFO: %q", info)
	}
	return st
}

// since returns the cost per message of n messages between before and st.
func (st stats) since(before stats, n int) dayCost {
	c := dayCost{by: map[string]float64{}, cpu: (st.cpu - before.cpu) / float64(n) * 1e6}
	for name, calls := range st.calls {
		d := float64(calls-before.calls[name]) / float64(n)
		if d == 0 || clientCommands[name] {
			continue
		}
		c.by[name] = d
		c.inner += d
	}
	c.purges = c.by["hgetall"]
	return c
}

// footprint sums MEMORY USAGE of the buckets and of the text lists under
// prefix, and counts the buckets and their fields.
func footprint(b *testing.B, c redis.UniversalClient, prefix string) (buckets, lists, fields, n int64) {
	ctx := context.Background()
	for _, k := range redistest.Keys(b, c, prefix) {
		tail := k[strings.LastIndex(k, "}")+1:]
		if tail == "e0" || tail == "e1" || !strings.Contains(k, "}") {
			continue
		}
		size, err := c.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(tail, "b") && c.Type(ctx, k).Val() == "hash" {
			buckets += size
			fields += c.HLen(ctx, k).Val()
			n++
		} else {
			lists += size
		}
	}
	return buckets, lists, fields, n
}

// del deletes the keys matching pattern.
func del(b *testing.B, c redis.UniversalClient, pattern string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
}

// infoField returns an integer field of an INFO section.
func infoField(b *testing.B, c redis.UniversalClient, section, field string) int64 {
	for line := range strings.SplitSeq(c.Info(context.Background(), section).Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in INFO %s", field, section)
	return 0
}
