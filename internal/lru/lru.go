// Package lru is a bounded map that is safe for concurrent use and evicts
// the least recently used entries first: the one shape of every memo dpsql
// keeps in memory (the accountant's privacy loss distributions, its
// compositions and certified epsilons, release's noise tables).
package lru

import (
	"container/list"
	"sync"
)

// Cache holds entries of a total weight of at most its limit. An entry's
// weight is what the weigh function of [New] says (the bins of a
// distribution, say), or 1. Values must not be changed once stored: a
// Cache hands the same value to every caller.
type Cache[K comparable, V any] struct {
	mu     sync.Mutex
	limit  int
	weigh  func(V) int
	items  map[K]*list.Element // of *entry[K, V]
	order  list.List           // most recently used first
	weight int
}

type entry[K comparable, V any] struct {
	key K
	val V
	w   int
}

// New returns an empty cache of entries of total weight at most limit,
// weighed by weigh (nil: every entry weighs 1). An entry heavier than a
// quarter of the limit is never kept: it would push out most of the others.
func New[K comparable, V any](limit int, weigh func(V) int) *Cache[K, V] {
	return &Cache[K, V]{limit: limit, weigh: weigh, items: map[K]*list.Element{}}
}

// Get returns the value of k and whether the cache holds it; a hit makes k
// the most recently used entry.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Put stores v under k, unless k already holds a value (that value is kept
// and returned, so that callers who built the same value at once share one),
// and evicts the least recently used entries until the total weight is
// within the limit again. It returns the value k now holds: v if v was kept
// or is too heavy to keep.
func (c *Cache[K, V]) Put(k K, v V) V {
	w := 1
	if c.weigh != nil {
		w = c.weigh(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*entry[K, V]).val
	}
	if w > max(1, c.limit/4) {
		return v
	}
	c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, w: w})
	c.weight += w
	for c.weight > c.limit && c.order.Len() > 1 {
		old := c.order.Remove(c.order.Back()).(*entry[K, V])
		delete(c.items, old.key)
		c.weight -= old.w
	}
	return v
}

// GetOr returns the value of k, building and storing it (with Put) when the
// cache does not hold it. build runs without the cache's lock, so two
// callers may build the same value at once; both then get the one stored.
// An error of build is returned and nothing is stored.
func (c *Cache[K, V]) GetOr(k K, build func() (V, error)) (V, error) {
	if v, ok := c.Get(k); ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	return c.Put(k, v), nil
}

// Len returns the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Weight returns the total weight of the entries held.
func (c *Cache[K, V]) Weight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.weight
}

// Clear empties the cache.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.items)
	c.order.Init()
	c.weight = 0
}
