package bot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/vktest"
)

// TestLastDropsSayWhy: a reply VK refuses for good is counted and kept,
// with VK's answer, among the last few drops, newest first.
func TestLastDropsSayWhy(t *testing.T) {
	vk := vktest.NewServer()
	defer vk.Close()
	b, _ := newBotOutbox(t, newMemCounter(), vk, fastOptions(), "tok")
	if got := b.LastDrops(); len(got) != 0 {
		t.Fatalf("LastDrops before any drop: %v", got)
	}
	vk.FailNext(0, 901)
	for i := range 3 {
		if err := b.HandleMessage(context.Background(), msg(i, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	drops := b.LastDrops()
	if st := b.Stats(); st.Dropped != 1 || len(drops) != 1 {
		t.Fatalf("dropped %d, LastDrops %+v; want one", st.Dropped, drops)
	}
	if d := drops[0]; !strings.Contains(d.Error, "901") || d.PeerID == 0 || d.At.IsZero() {
		t.Errorf("drop %+v: want VK's error 901, the peer and the time", d)
	}
}
