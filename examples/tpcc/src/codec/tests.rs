use super::*;

#[test]
fn key_order_is_numeric_order() {
    let mut keys: Vec<(u16, u8, u32, u8)> = vec![
        (1, 1, 1, 1),
        (1, 1, 255, 2),
        (1, 1, 256, 1),
        (1, 2, 0, 0),
        (2, 1, 1, 1),
        (256, 1, 70_000, 15),
        (1, 10, 3001, 5),
    ];
    let mut encoded: Vec<_> = keys
        .iter()
        .map(|&(w, d, o, n)| order_line_key(w, d, o, n))
        .collect();
    keys.sort();
    encoded.sort();
    let back: Vec<_> = encoded
        .iter()
        .map(|k| {
            let (w, d, o) = split_wd_u32(k).unwrap();
            (w, d, o, k[7])
        })
        .collect();
    assert_eq!(keys, back);
}

#[test]
fn last_name_index_sorts_by_first_name_within_a_name() {
    let a = customer_by_last_key(1, 1, "BARBAR", "AB", 9);
    let b = customer_by_last_key(1, 1, "BARBAR", "ABC", 2);
    let c = customer_by_last_key(1, 1, "BARBARBAR", "A", 1);
    assert!(a < b && b < c);
    let (from, to) = customer_by_last_range(1, 1, "BARBAR");
    assert!(from <= a && b < to && c >= to);
    assert_eq!(customer_by_last_id(&b).unwrap(), 2);
}

#[test]
fn newest_order_comes_first_in_the_customer_index() {
    let older = order_by_customer_key(1, 2, 3, 10);
    let newer = order_by_customer_key(1, 2, 3, 11);
    assert!(newer < older);
    assert_eq!(order_by_customer_o_id(&newer).unwrap(), 11);
}

#[test]
fn rows_round_trip_and_c_data_is_replaced() {
    let c = Customer {
        c_first: "first".into(),
        c_last: "BARBARBAR".into(),
        c_data: "x".repeat(400),
        c_balance: -1000,
        ..Customer::default()
    };
    let mut v = Vec::new();
    encode_customer(&c, &mut v);
    assert_eq!(get_i64(&v, off::C_BALANCE, "c").unwrap(), -1000);
    let mut t = TextReader::new(&v, off::C_TEXT, "customer");
    assert_eq!(t.short_str().unwrap(), "first");
    t.skip_short(1).unwrap();
    assert_eq!(t.short_str().unwrap(), "BARBARBAR");
    replace_c_data(&mut v, "new data").unwrap();
    let mut t = TextReader::new(&v, off::C_TEXT, "customer");
    t.skip_short(C_SHORT_COLUMNS).unwrap();
    assert_eq!(t.long_str().unwrap(), "new data");

    let m = Meta {
        warehouses: 3,
        scale: Scale::SMALL,
        c_last_load: 77,
    };
    assert_eq!(decode_meta(&encode_meta(&m)).unwrap(), m);
    assert!(decode_meta(&[1, 2]).is_err());
}

#[test]
fn truncated_rows_are_errors_not_panics() {
    let mut v = Vec::new();
    encode_customer(&Customer::default(), &mut v);
    for cut in 0..v.len() {
        let mut t = TextReader::new(&v[..cut], off::C_TEXT, "customer");
        let r = t
            .skip_short(C_SHORT_COLUMNS)
            .and_then(|_| t.long().map(|_| ()));
        assert!(r.is_err(), "cut at {cut}");
    }
    assert!(decode_order(&[0; 3]).is_err());
    assert!(get_i64(&[0; 7], 0, "x").is_err());
}
