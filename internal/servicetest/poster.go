package servicetest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/vktest"
)

// A Poster posts events the way VK does: an event that got no "ok" is posted
// again, with X-Retry-Counter, until it gets one.
type Poster struct {
	// URL is the webhook's; a test changes it to post to another instance.
	URL string

	mu  sync.Mutex
	ok  map[int]string // peer → text, for every event answered ok
	hit map[string]int // text → events answered ok
}

// NewPoster returns a Poster to the webhook at url.
func NewPoster(url string) *Poster {
	return &Poster{URL: url, ok: map[int]string{}, hit: map[string]int{}}
}

// Post sends one event (Event, from peer with text) once, retry its
// X-Retry-Counter (0: none), and tells whether it was answered ok.
func (p *Poster) Post(peer int, text string, retry int) bool {
	req, _ := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(string(Event(fmt.Sprintf("ev-%d", peer), peer, 1, text))))
	if retry > 0 {
		req.Header.Set("X-Retry-Counter", strconv.Itoa(retry))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		return false
	}
	p.mu.Lock()
	if _, seen := p.ok[peer]; !seen {
		p.ok[peer] = text
		p.hit[text]++
	}
	p.mu.Unlock()
	return true
}

// Answered is how many events were answered ok.
func (p *Poster) Answered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ok)
}

// CheckExactlyOnce asserts that every event answered ok got exactly one
// message at the fake VK API, and that for each text the numbers form
// exactly 0..n-1: every event counted once.
func (p *Poster) CheckExactlyOnce(t *testing.T, vk *vktest.Server) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	eventually.True(t, time.Minute, "a message for every ok", func() bool { return len(vk.Messages()) >= len(p.ok) })
	perPeer := map[int]int{}
	numbers := map[string][]bool{}
	for _, m := range vk.Messages() {
		perPeer[m.PeerID]++
		text, ok := p.ok[m.PeerID]
		if !ok {
			t.Errorf("message to peer %d, whose event never got ok", m.PeerID)
			continue
		}
		n, err := strconv.Atoi(m.Message)
		if numbers[text] == nil {
			numbers[text] = make([]bool, p.hit[text])
		}
		if err != nil || n < 0 || n >= p.hit[text] || numbers[text][n] {
			t.Errorf("text %q: answer %q is not a new number below %d", text, m.Message, p.hit[text])
			continue
		}
		numbers[text][n] = true
	}
	missing, twice := 0, 0
	for peer := range p.ok {
		switch perPeer[peer] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 {
		t.Errorf("of %d events answered ok: %d got no message, %d got several", len(p.ok), missing, twice)
	}
}
