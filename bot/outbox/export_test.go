package outbox

// ReadUnderWay notes a read of group under way, as Take does around its
// reads, until end is called.
func (o *Outbox) ReadUnderWay(group int) (end func()) {
	_, end = o.community(group).handouts.beginRead()
	return end
}
