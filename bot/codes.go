package bot

import (
	"slices"
	"strconv"
)

// CallResults lists every result VKOptions.OnCall can name ahead of time:
// "0", each VK error code the sender classifies (Classify's table) and
// "transport", for metric labels that must exist from the first scrape.
func CallResults() []string {
	codes := make([]int, 0, len(vkErrors))
	for c := range vkErrors {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	out := []string{callResult(nil)}
	for _, c := range codes {
		out = append(out, strconv.Itoa(c))
	}
	return append(out, "transport")
}
