//! The key flattener: a node kind's `#[derive(Serialize)]` key struct (declared in
//! `plan/build.rs`) turned into the string map that [`super::keys::key_of`] hashes and `plan`
//! diffs ("changed: x: old → new"). Field names are the map's names; values keep the exact
//! text the keys have always hashed (a node key must not move under a user's cache —
//! `tests/fixtures/keys` pins them): strings as they are, integers as numbers, floats as
//! Rust's `Display` text, lists and enums as their JSON.

use serde::Serialize;

use super::keys::KeyInputs;

/// A key struct flattened into key inputs: each field (and each entry of a flattened map) is
/// one input; strings as they are, numbers and booleans as JSON writes them, anything else as
/// its JSON text; `None` and unit fields are left out. The same map as going through
/// `serde_json::Value`, without building one per node.
pub(crate) fn inputs_of<T: Serialize>(t: &T) -> KeyInputs {
    let mut out = KeyInputs::new();
    t.serialize(flat::Flat { out: &mut out })
        .expect("key inputs serialize");
    out
}

mod flat {
    use serde::ser::{self, Impossible, Serialize};

    use super::KeyInputs;

    #[derive(Debug)]
    pub(super) struct Unsupported;

    impl std::fmt::Display for Unsupported {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("not a plain value")
        }
    }
    impl std::error::Error for Unsupported {}
    impl ser::Error for Unsupported {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Unsupported
        }
    }

    /// The top level: a struct (or map, with `#[serde(flatten)]`) of inputs.
    pub(super) struct Flat<'a> {
        pub out: &'a mut KeyInputs,
    }

    fn put<T: Serialize + ?Sized>(out: &mut KeyInputs, key: String, value: &T) {
        match value.serialize(Plain) {
            Ok(Some(v)) => {
                out.insert(key, v);
            }
            Ok(None) => {}
            Err(Unsupported) => {
                let v = serde_json::to_value(value).expect("key inputs serialize");
                match v {
                    serde_json::Value::Null => {}
                    serde_json::Value::String(s) => {
                        out.insert(key, s);
                    }
                    other => {
                        out.insert(key, other.to_string());
                    }
                }
            }
        }
    }

    /// One value as the input's text: Some(text), None (left out) or Unsupported (use JSON).
    struct Plain;

    macro_rules! plain_int {
        ($($f:ident $t:ty),*) => {$(
            fn $f(self, v: $t) -> Result<Self::Ok, Self::Error> {
                Ok(Some(v.to_string()))
            }
        )*};
    }

    impl ser::Serializer for Plain {
        type Ok = Option<String>;
        type Error = Unsupported;
        type SerializeSeq = Impossible<Self::Ok, Unsupported>;
        type SerializeTuple = Impossible<Self::Ok, Unsupported>;
        type SerializeTupleStruct = Impossible<Self::Ok, Unsupported>;
        type SerializeTupleVariant = Impossible<Self::Ok, Unsupported>;
        type SerializeMap = Impossible<Self::Ok, Unsupported>;
        type SerializeStruct = Impossible<Self::Ok, Unsupported>;
        type SerializeStructVariant = Impossible<Self::Ok, Unsupported>;
        plain_int!(serialize_i8 i8, serialize_i16 i16, serialize_i32 i32, serialize_i64 i64,
            serialize_u8 u8, serialize_u16 u16, serialize_u32 u32, serialize_u64 u64);
        fn serialize_bool(self, v: bool) -> Result<Self::Ok, Unsupported> {
            Ok(Some(v.to_string()))
        }
        fn serialize_str(self, v: &str) -> Result<Self::Ok, Unsupported> {
            Ok(Some(v.to_string()))
        }
        fn serialize_none(self) -> Result<Self::Ok, Unsupported> {
            Ok(None)
        }
        fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Self::Ok, Unsupported> {
            v.serialize(self)
        }
        fn serialize_unit(self) -> Result<Self::Ok, Unsupported> {
            Ok(None)
        }
        // Everything else is written as JSON text by the caller.
        fn serialize_f32(self, _: f32) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_f64(self, _: f64) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_char(self, _: char) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_bytes(self, _: &[u8]) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Unsupported> {
            Err(Unsupported)
        }
    }

    impl<'a> ser::SerializeStruct for Flat<'a> {
        type Ok = ();
        type Error = Unsupported;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            key: &'static str,
            value: &T,
        ) -> Result<(), Unsupported> {
            put(self.out, key.to_string(), value);
            Ok(())
        }
        fn end(self) -> Result<(), Unsupported> {
            Ok(())
        }
    }

    /// `#[serde(flatten)]` makes the derive write the struct as a map.
    pub(super) struct FlatMap<'a> {
        out: &'a mut KeyInputs,
        key: Option<String>,
    }

    impl<'a> ser::SerializeMap for FlatMap<'a> {
        type Ok = ();
        type Error = Unsupported;
        fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
            // Field names and the flattened maps' keys: strings, read as any plain value.
            match key.serialize(Plain)? {
                Some(k) => self.key = Some(k),
                None => return Err(Unsupported),
            }
            Ok(())
        }
        fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
            let key = self.key.take().ok_or(Unsupported)?;
            put(self.out, key, value);
            Ok(())
        }
        fn end(self) -> Result<(), Unsupported> {
            Ok(())
        }
    }

    impl<'a> ser::Serializer for Flat<'a> {
        type Ok = ();
        type Error = Unsupported;
        type SerializeSeq = Impossible<(), Unsupported>;
        type SerializeTuple = Impossible<(), Unsupported>;
        type SerializeTupleStruct = Impossible<(), Unsupported>;
        type SerializeTupleVariant = Impossible<(), Unsupported>;
        type SerializeMap = FlatMap<'a>;
        type SerializeStruct = Flat<'a>;
        type SerializeStructVariant = Impossible<(), Unsupported>;
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, Unsupported> {
            Ok(self)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
            Ok(FlatMap {
                out: self.out,
                key: None,
            })
        }
        fn serialize_bool(self, _: bool) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_i8(self, _: i8) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_i16(self, _: i16) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_i32(self, _: i32) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_i64(self, _: i64) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_u8(self, _: u8) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_u16(self, _: u16) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_u32(self, _: u32) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_u64(self, _: u64) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_f32(self, _: f32) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_f64(self, _: f64) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_char(self, _: char) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_str(self, _: &str) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_bytes(self, _: &[u8]) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_none(self) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_unit(self) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: &T,
        ) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), Unsupported> {
            Err(Unsupported)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Unsupported> {
            Err(Unsupported)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Unsupported> {
            Err(Unsupported)
        }
    }

    #[cfg(test)]
    mod tests {
        use std::collections::BTreeMap;

        #[derive(serde::Serialize)]
        struct K<'a> {
            s: &'a str,
            n: u32,
            b: Option<bool>,
            none: Option<u32>,
            f: f64,
            v: Vec<u32>,
            #[serde(flatten)]
            m: BTreeMap<String, String>,
            o: Option<String>,
        }

        /// The flat serializer gives exactly the map that going through serde_json gave.
        #[test]
        fn same_inputs_as_through_json() {
            let k = K {
                s: "x",
                n: 7,
                b: Some(true),
                none: None,
                f: 0.5,
                v: vec![1, 2],
                m: [("task.dataset.a".to_string(), "h".to_string())].into(),
                o: Some("y".into()),
            };
            let mut via_json = super::KeyInputs::new();
            if let serde_json::Value::Object(m) = serde_json::to_value(&k).unwrap() {
                for (key, v) in m {
                    match v {
                        serde_json::Value::Null => {}
                        serde_json::Value::String(s) => {
                            via_json.insert(key, s);
                        }
                        other => {
                            via_json.insert(key, other.to_string());
                        }
                    }
                }
            }
            assert_eq!(super::super::inputs_of(&k), via_json);
        }
    }
}
