package participant_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vkcounter/vkcounter/counters/participant"
)

func ExampleFile() {
	dir, _ := os.MkdirTemp("", "bbs")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bbs.cnt")
	// The BBS's file, as the BBS left it.
	os.WriteFile(path, []byte("3789011499,1762615624\n2500871836,1762615696\n"), 0o644)

	now := func() time.Time { return time.Unix(1762615696, 0) }
	store, err := participant.NewFile(path, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	active, isNew, _ := participant.Visit(ctx, store, participant.DefaultName, participant.IPKey("192.168.1.1"), 300*time.Second)
	fmt.Println(active, isNew)
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output:
	// 3 true
	// 3789011499,1762615624
	// 2500871836,1762615696
	// 1727004492,1762615696
}

func ExampleMemory() {
	store := participant.NewMemory(nil, participant.MemoryLimits{})
	ctx := context.Background()
	fmt.Println(participant.Visit(ctx, store, "vk.users", "42", 0))
	fmt.Println(participant.Visit(ctx, store, "vk.users", "42", 0))
	fmt.Println(store.Leave(ctx, "vk.users", "42"))
	fmt.Println(store.Leave(ctx, "vk.users", "42"))
	// Output:
	// 1 true <nil>
	// 1 false <nil>
	// 0 true <nil>
	// 0 false <nil>
}

func ExampleMemory_VisitMany() {
	store := participant.NewMemory(nil, participant.MemoryLimits{})
	ctx := context.Background()
	fmt.Println(store.VisitMany(ctx, "vk.users", []string{"42", "7"}, 0))
	// 42 was active already and 9 repeats: one key added.
	fmt.Println(store.VisitMany(ctx, "vk.users", []string{"42", "9", "9"}, 0))
	fmt.Println(store.VisitMany(ctx, "vk.users", nil, 0))
	// Output:
	// 2 2 <nil>
	// 3 1 <nil>
	// 0 0 participant: invalid key: a batch of 0 keys, want 1 to 10000
}
