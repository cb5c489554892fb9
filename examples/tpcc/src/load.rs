//! The initial population (clause 4.3.3.1), generated from a seed and pushed into any
//! engine through [`LoadSink`].

use anyhow::Result;

use crate::random::{NuRandC, TpccRng, last_name};
use crate::schema::{
    Customer, DISTRICTS, District, History, Item, Meta, NewOrder, Order, OrderLine, Scale, Stock,
    Warehouse,
};

/// Where the loader puts rows. Rows are lent, not given: the loader reuses them.
pub trait LoadSink {
    /// Inserts an ITEM row.
    fn insert_item(&mut self, row: &Item) -> Result<()>;
    /// Inserts a WAREHOUSE row.
    fn insert_warehouse(&mut self, row: &Warehouse) -> Result<()>;
    /// Inserts a STOCK row.
    fn insert_stock(&mut self, row: &Stock) -> Result<()>;
    /// Inserts a DISTRICT row.
    fn insert_district(&mut self, row: &District) -> Result<()>;
    /// Inserts a CUSTOMER row (and its last-name index entry).
    fn insert_customer(&mut self, row: &Customer) -> Result<()>;
    /// Inserts a HISTORY row.
    fn insert_history(&mut self, row: &History) -> Result<()>;
    /// Inserts an ORDER row (and its by-customer index entry).
    fn insert_order(&mut self, row: &Order) -> Result<()>;
    /// Inserts an ORDER-LINE row.
    fn insert_order_line(&mut self, row: &OrderLine) -> Result<()>;
    /// Inserts a NEW-ORDER row.
    fn insert_new_order(&mut self, row: &NewOrder) -> Result<()>;
    /// A point where the sink may commit what it has (the loader calls it often enough
    /// to bound a transaction's size, rarely enough to amortize a commit).
    fn batch_boundary(&mut self) -> Result<()>;
    /// Records the metadata and makes everything durable.
    fn finish(&mut self, meta: &Meta) -> Result<()>;
}

/// Loads `warehouses` warehouses at `scale`, all randomness drawn from `seed`.
/// `progress` is told about each unit of work done (see [`load_units`]).
pub fn populate(
    sink: &mut dyn LoadSink,
    warehouses: u16,
    scale: Scale,
    seed: u64,
    now: i64,
    progress: &mut dyn FnMut(u64),
) -> Result<Meta> {
    scale.validate().map_err(anyhow::Error::msg)?;
    if warehouses == 0 {
        anyhow::bail!("the number of warehouses must be at least 1");
    }
    let mut rng = TpccRng::new(seed);
    let c = NuRandC::for_load(&mut rng);
    let meta = Meta {
        warehouses,
        scale,
        c_last_load: c.c_last,
    };

    let mut item = Item::default();
    for i_id in 1..=scale.items {
        item.i_id = i_id;
        item.i_im_id = rng.uniform(1, 10_000);
        item.i_name.clear();
        rng.a_string(14, 24, &mut item.i_name);
        item.i_price = rng.uniform_i64(100, 10_000);
        item.i_data.clear();
        rng.data_with_original(&mut item.i_data);
        sink.insert_item(&item)?;
        if i_id % 10_000 == 0 {
            sink.batch_boundary()?;
        }
    }
    sink.batch_boundary()?;
    progress(1);

    let mut loader = WarehouseLoader {
        rng,
        c,
        scale,
        now,
        stock: Stock::default(),
        customer: Customer::default(),
        history: History::default(),
        line: OrderLine::default(),
        permutation: Vec::new(),
    };
    for w_id in 1..=warehouses {
        loader.warehouse(sink, w_id, progress)?;
    }
    sink.finish(&meta)?;
    Ok(meta)
}

/// The units of work [`populate`] reports: the items, then per warehouse its stock
/// and each of its districts.
pub fn load_units(warehouses: u16) -> u64 {
    1 + u64::from(warehouses) * (1 + u64::from(DISTRICTS))
}

/// Per-warehouse state, with rows reused across iterations.
struct WarehouseLoader {
    rng: TpccRng,
    c: NuRandC,
    scale: Scale,
    now: i64,
    stock: Stock,
    customer: Customer,
    history: History,
    line: OrderLine,
    permutation: Vec<u32>,
}

impl WarehouseLoader {
    fn warehouse(
        &mut self,
        sink: &mut dyn LoadSink,
        w_id: u16,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let rng = &mut self.rng;
        let mut w = Warehouse {
            w_id,
            w_tax: rng.uniform(0, 2000) as i32,
            w_ytd: 30_000_000,
            ..Warehouse::default()
        };
        rng.a_string(6, 10, &mut w.w_name);
        address(
            rng,
            [
                &mut w.w_street_1,
                &mut w.w_street_2,
                &mut w.w_city,
                &mut w.w_state,
                &mut w.w_zip,
            ],
        );
        sink.insert_warehouse(&w)?;

        let s = &mut self.stock;
        s.s_w_id = w_id;
        s.s_ytd = 0;
        s.s_order_cnt = 0;
        s.s_remote_cnt = 0;
        for i_id in 1..=self.scale.items {
            s.s_i_id = i_id;
            s.s_quantity = rng.uniform(10, 100) as i32;
            for dist in &mut s.s_dist {
                fixed_a_string(rng, dist);
            }
            s.s_data.clear();
            rng.data_with_original(&mut s.s_data);
            sink.insert_stock(s)?;
            if i_id % 10_000 == 0 {
                sink.batch_boundary()?;
            }
        }
        sink.batch_boundary()?;
        progress(1);

        for d_id in 1..=DISTRICTS {
            self.district(sink, w_id, d_id)?;
            sink.batch_boundary()?;
            progress(1);
        }
        Ok(())
    }

    fn district(&mut self, sink: &mut dyn LoadSink, w_id: u16, d_id: u8) -> Result<()> {
        let rng = &mut self.rng;
        let scale = self.scale;
        let mut d = District {
            d_id,
            d_w_id: w_id,
            d_tax: rng.uniform(0, 2000) as i32,
            d_ytd: 3_000_000,
            d_next_o_id: scale.orders() + 1,
            ..District::default()
        };
        rng.a_string(6, 10, &mut d.d_name);
        address(
            rng,
            [
                &mut d.d_street_1,
                &mut d.d_street_2,
                &mut d.d_city,
                &mut d.d_state,
                &mut d.d_zip,
            ],
        );
        sink.insert_district(&d)?;

        let c = &mut self.customer;
        let h = &mut self.history;
        for c_id in 1..=scale.customers {
            c.c_id = c_id;
            c.c_d_id = d_id;
            c.c_w_id = w_id;
            c.c_last.clear();
            let name = if c_id <= scale.named_customers() {
                c_id - 1
            } else {
                rng.nurand(255, 0, scale.last_name_max(), self.c.c_last)
            };
            last_name(name, &mut c.c_last);
            c.c_middle.clear();
            c.c_middle.push_str("OE");
            c.c_first.clear();
            rng.a_string(8, 16, &mut c.c_first);
            for f in [
                &mut c.c_street_1,
                &mut c.c_street_2,
                &mut c.c_city,
                &mut c.c_state,
                &mut c.c_zip,
                &mut c.c_phone,
            ] {
                f.clear();
            }
            address(
                rng,
                [
                    &mut c.c_street_1,
                    &mut c.c_street_2,
                    &mut c.c_city,
                    &mut c.c_state,
                    &mut c.c_zip,
                ],
            );
            rng.n_string(16, 16, &mut c.c_phone);
            c.c_since = self.now;
            c.c_credit = if rng.uniform(1, 10) == 1 {
                *b"BC"
            } else {
                *b"GC"
            };
            c.c_credit_lim = 5_000_000;
            c.c_discount = rng.uniform(0, 5000) as i32;
            c.c_balance = -1000;
            c.c_ytd_payment = 1000;
            c.c_payment_cnt = 1;
            c.c_delivery_cnt = 0;
            c.c_data.clear();
            rng.a_string(300, 500, &mut c.c_data);
            sink.insert_customer(c)?;

            h.h_c_id = c_id;
            h.h_c_d_id = d_id;
            h.h_c_w_id = w_id;
            h.h_d_id = d_id;
            h.h_w_id = w_id;
            h.h_date = self.now;
            h.h_amount = 1000;
            h.h_data.clear();
            rng.a_string(12, 24, &mut h.h_data);
            sink.insert_history(h)?;
        }

        // O_C_ID comes from a random permutation of the customer ids.
        let perm = &mut self.permutation;
        perm.clear();
        perm.extend(1..=scale.customers);
        for i in (1..perm.len()).rev() {
            let j = rng.uniform(0, i as u32) as usize;
            perm.swap(i, j);
        }
        let first_new = scale.first_new_order();
        let l = &mut self.line;
        for o_id in 1..=scale.orders() {
            let delivered = o_id < first_new;
            let ol_cnt = rng.uniform(5, 15) as u8;
            let o = Order {
                o_id,
                o_d_id: d_id,
                o_w_id: w_id,
                o_c_id: perm[(o_id - 1) as usize],
                o_entry_d: self.now,
                o_carrier_id: delivered.then(|| rng.uniform(1, 10) as u8),
                o_ol_cnt: ol_cnt,
                o_all_local: true,
            };
            sink.insert_order(&o)?;
            for ol_number in 1..=ol_cnt {
                l.ol_o_id = o_id;
                l.ol_d_id = d_id;
                l.ol_w_id = w_id;
                l.ol_number = ol_number;
                l.ol_i_id = rng.uniform(1, scale.items);
                l.ol_supply_w_id = w_id;
                l.ol_delivery_d = delivered.then_some(self.now);
                l.ol_quantity = 5;
                l.ol_amount = if delivered {
                    0
                } else {
                    rng.uniform_i64(1, 999_999)
                };
                fixed_a_string(rng, &mut l.ol_dist_info);
                sink.insert_order_line(l)?;
            }
            if !delivered {
                sink.insert_new_order(&NewOrder {
                    no_o_id: o_id,
                    no_d_id: d_id,
                    no_w_id: w_id,
                })?;
            }
        }
        Ok(())
    }
}

/// Fills street 1, street 2, city (a-strings of 10 to 20), state (2 letters) and zip.
fn address(rng: &mut TpccRng, [street_1, street_2, city, state, zip]: [&mut String; 5]) {
    rng.a_string(10, 20, street_1);
    rng.a_string(10, 20, street_2);
    rng.a_string(10, 20, city);
    for _ in 0..2 {
        state.push((b'A' + rng.uniform(0, 25) as u8) as char);
    }
    rng.zip(zip);
}

/// Fills a fixed-width `char(24)` column with a random a-string of exactly 24 characters.
fn fixed_a_string(rng: &mut TpccRng, out: &mut [u8; 24]) {
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for b in out {
        *b = ALNUM[rng.uniform(0, ALNUM.len() as u32 - 1) as usize];
    }
}
