package outbox

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The outbox's Lua scripts, one per file, each describing its keys,
// arguments and reply; docs/REDIS.md tells why each is safe to
// repeat. The scripts that queue a reply are the store's (freq).
var (
	//go:embed reading.lua
	readingLib string // the library stats.lua and done.lua share
	//go:embed trim.lua
	trimLib string // the library done.lua and release.lua share
	//go:embed earliest.lua
	earliestLib string // the library later.lua, due.lua, forget.lua and claim.lua share

	//go:embed stats.lua
	statsLua string
	//go:embed prune.lua
	pruneLua string
	//go:embed done.lua
	doneLua string
	//go:embed recover.lua
	recoverLua string
	//go:embed release.lua
	releaseLua string
	//go:embed later.lua
	laterLua string
	//go:embed due.lua
	dueLua string
	//go:embed forget.lua
	forgetLua string
	//go:embed claim.lua
	claimLua string
)

var (
	statsScript   = redis.NewScript(readingLib + statsLua)
	pruneScript   = redis.NewScript(pruneLua)
	doneScript    = redis.NewScript(readingLib + trimLib + doneLua)
	recoverScript = redis.NewScript(recoverLua)
	releaseScript = redis.NewScript(trimLib + releaseLua)
	laterScript   = redis.NewScript(trimLib + earliestLib + laterLua)
	dueScript     = redis.NewScript(earliestLib + dueLua)
	forgetScript  = redis.NewScript(earliestLib + forgetLua)
	claimScript   = redis.NewScript(earliestLib + claimLua)
)
