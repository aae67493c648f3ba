package service

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/vkcounter/vkcounter/internal/redistest"
)

// shownTopTexts is /stats' top_texts as a client reads it.
type shownTopTexts struct {
	SeenBy string `json:"seen_by"`
	Max    int    `json:"max"`
	Texts  []struct {
		GroupID int     `json:"group_id"`
		Text    string  `json:"text"`
		Count   int64   `json:"count"`
		Seen    float64 `json:"seen_seconds_ago"`
	} `json:"texts"`
}

// getTopTexts reads /stats' top_texts; nil when absent.
func (a *app) getTopTexts(t testing.TB) *shownTopTexts {
	t.Helper()
	resp, err := http.Get(a.AdminURL("/stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		TopTexts *shownTopTexts `json:"top_texts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.TopTexts
}

// TestTopTexts: with TOP_TEXTS=5, after 500 messages over 50 texts the
// page and /stats list the five most repeated with their counts, as seen
// by this instance; without it nothing is kept, and neither shows any.
func TestTopTexts(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		// Text i < 10 is sent 20-i times, the 40 others share the rest
		// (8 or 9 each): 500 messages in a shuffled order, the ten
		// leading texts each a count of its own above the others'. (1,000,
		// the counts doubled, proved no more, in twice the time: 3 s on
		// miniredis under -race on an idle machine, 13 s on a busy one.)
		var texts []string
		for i := range 10 {
			for range 20 - i {
				texts = append(texts, fmt.Sprintf("text%02d", i))
			}
		}
		for i := 0; len(texts) < 500; i++ {
			texts = append(texts, fmt.Sprintf("text%02d", 10+i%40))
		}
		rand.New(rand.NewPCG(4, 0)).Shuffle(len(texts), func(i, j int) { texts[i], texts[j] = texts[j], texts[i] })

		a := startApp(t, tg, map[string]string{"TOP_TEXTS": "5", "VK_TOKEN": ""})
		for i, text := range texts {
			a.MustOK(t, event(fmt.Sprintf("e%d", i), 1000+i, 1, text))
		}
		a.MustOK(t, event("e0", 1000, 1, texts[0])) // a re-delivery changes nothing
		top := a.getTopTexts(t)
		var got []string
		for _, x := range top.Texts {
			got = append(got, fmt.Sprintf("%d %s=%d", x.GroupID, x.Text, x.Count))
		}
		want := fmt.Sprintf("%[1]d text00=20 %[1]d text01=19 %[1]d text02=18 %[1]d text03=17 %[1]d text04=16", testGroup)
		if top.SeenBy != "this instance" || top.Max != 5 || strings.Join(got, " ") != want {
			t.Errorf("/stats top_texts: %+v %q, want %s", top, got, want)
		}
		_, page := a.getPage(t)
		for i := range 5 {
			row := regexp.MustCompile(fmt.Sprintf(`<q>text%02d</q>[^\n]*<td class="n">%d</td>`, i, 20-i))
			if !row.MatchString(page) {
				t.Errorf("the page lacks text%02d with %d", i, 20-i)
			}
		}
		if !strings.Contains(page, "Most repeated texts, as seen by this instance") || strings.Contains(page, "<q>text05</q>") {
			t.Errorf("the page's top texts are wrong")
		}

		off := startApp(t, tg, map[string]string{"VK_TOKEN": ""})
		for i := range 20 {
			off.MustOK(t, event(fmt.Sprintf("o%d", i), 1000+i, 1, "same"))
		}
		if off.bot.top != nil || off.getTopTexts(t) != nil {
			t.Errorf("without TOP_TEXTS texts are kept: %+v", off.getTopTexts(t))
		}
		if _, page := off.getPage(t); strings.Contains(page, "Most repeated") {
			t.Errorf("without TOP_TEXTS the page shows top texts")
		}
	}, singleServers...)
}
