//! One page of a sorted list: the first `limit` items after a continue token, found without
//! sorting (or copying) the whole list.

use std::collections::BinaryHeap;

/// The smallest `limit` items of `items`, in order, and whether more were left out; every
/// item, sorted, when there is no limit.
pub fn smallest<T: Ord>(items: impl Iterator<Item = T>, limit: Option<usize>) -> (Vec<T>, bool) {
    let Some(limit) = limit else {
        let mut all: Vec<T> = items.collect();
        all.sort();
        return (all, false);
    };
    let mut heap = BinaryHeap::with_capacity(limit.saturating_add(1).min(1 << 16));
    let mut more = false;
    for item in items {
        if heap.len() < limit {
            heap.push(item);
            continue;
        }
        more = true;
        if heap.peek().is_some_and(|top| item < *top) {
            heap.pop();
            heap.push(item);
        }
    }
    (heap.into_sorted_vec(), more)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_the_whole_list_in_order() {
        let items = [5, 3, 9, 1, 7, 2, 8];
        assert_eq!(
            smallest(items.iter(), None),
            (vec![&1, &2, &3, &5, &7, &8, &9], false)
        );
        let mut seen: Vec<i32> = Vec::new();
        let mut after = 0;
        loop {
            let (page, more) = smallest(items.iter().copied().filter(|i| *i > after), Some(3));
            assert!(page.len() <= 3);
            seen.extend(&page);
            match (more, page.last()) {
                (true, Some(last)) => after = *last,
                _ => break,
            }
        }
        assert_eq!(seen, [1, 2, 3, 5, 7, 8, 9]);
        assert!(!smallest(items.iter(), Some(7)).1);
        assert!(smallest(items.iter(), Some(6)).1);
    }
}
