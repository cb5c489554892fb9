//! The tables and indexes of the key/value engines.

/// The tables and indexes a key/value engine keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// WAREHOUSE by `w_id`.
    Warehouse,
    /// DISTRICT by `(w_id, d_id)`.
    District,
    /// CUSTOMER by `(w_id, d_id, c_id)`.
    Customer,
    /// Index: customer by `(w_id, d_id, c_last, c_first, c_id)`.
    CustomerByLast,
    /// HISTORY by `(c_w_id, c_d_id, c_id, c_payment_cnt)`.
    History,
    /// NEW-ORDER by `(w_id, d_id, o_id)`.
    NewOrder,
    /// ORDER by `(w_id, d_id, o_id)`.
    Order,
    /// Index: order by `(w_id, d_id, c_id, !o_id)`.
    OrderByCustomer,
    /// ORDER-LINE by `(w_id, d_id, o_id, ol_number)`.
    OrderLine,
    /// ITEM by `i_id`.
    Item,
    /// STOCK by `(w_id, i_id)`.
    Stock,
    /// The metadata record.
    Meta,
}

impl Table {
    /// Every table, in the order of [`Table::index`].
    pub const ALL: [Table; 12] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::CustomerByLast,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderByCustomer,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
        Table::Meta,
    ];

    /// Position in [`Table::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name a store files the table under.
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::CustomerByLast => "customer_by_last",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Order => "orders",
            Table::OrderByCustomer => "orders_by_customer",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
            Table::Meta => "tpcc_meta",
        }
    }

    /// Whether the table is a secondary index.
    pub fn is_index(self) -> bool {
        matches!(self, Table::CustomerByLast | Table::OrderByCustomer)
    }
}
