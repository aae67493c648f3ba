package access_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vkcounter/vkcounter/counters/access"
)

func ExampleFile() {
	// An existing BBS count directory, as the BBS left it.
	dir, _ := os.MkdirTemp("", "count")
	defer os.RemoveAll(dir)
	for i, v := range []string{"925", "924", "923", "922", "921"} {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("count%d.dat", i)), []byte(v), 0o644)
	}

	store, err := access.NewFile(dir, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	total, _ := access.Hit(ctx, store, access.DefaultName)
	fmt.Println("total:", total)
	b, _ := os.ReadFile(filepath.Join(dir, "count4.dat"))
	fmt.Println("count4.dat:", string(b))
	// Output:
	// total: 926
	// count4.dat: 926
}

func ExampleMemory() {
	store := access.NewMemory(access.MemoryLimits{})
	ctx := context.Background()
	access.Hit(ctx, store, "vk.messages")
	access.Hit(ctx, store, "vk.messages")
	total, _ := store.Total(ctx, "vk.messages")
	fmt.Println(total)
	_, err := store.Total(ctx, "never.hit")
	fmt.Println(err)
	// Output:
	// 2
	// access: counter not found
}
