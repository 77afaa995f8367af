"""Table: the column library every stage computes on (values interned to integer ids, numpy views of array columns, grouped sums and spans by bincount)."""
