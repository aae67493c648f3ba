package freq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/vkcounter/vkcounter/freq"
)

func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	s, err := freq.New(rdb, freq.Options{})
	if err != nil {
		panic(err)
	}
	if err := s.Load(ctx); err != nil {
		panic(err)
	}
	// Four deliveries of "hello"; VK re-sends event e2 once.
	for _, event := range []string{"e1", "e2", "e2", "e3"} {
		previous, duplicate, err := s.Count(ctx, "hello", event)
		if err != nil {
			panic(err)
		}
		fmt.Println(previous, duplicate)
	}
	// Output:
	// 0 false
	// 1 false
	// 1 true
	// 2 false
}

func ExampleStore_CountAt() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	s, err := freq.New(rdb, freq.Options{Window: time.Hour})
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, time.Minute, 59 * time.Minute, time.Hour, 2 * time.Hour} {
		res, err := s.CountAt(ctx, "hello", "", t0.Add(at))
		if err != nil {
			panic(err)
		}
		fmt.Printf("+%v: %d\n", at, res.Previous)
	}
	// Output:
	// +0s: 0
	// +1m0s: 1
	// +59m0s: 2
	// +1h0m0s: 2
	// +2h0m0s: 0
}
