//! `k8s.io/apiserver/pkg/cel/library/quantity.go`: `quantity()`,
//! `isQuantity()` and the Quantity methods.

use std::sync::Arc;

use berth_api::quantity::{Format, Quantity};

use crate::EvalError;
use crate::functions::CallResult;
use crate::value::EvalValue;

const NANOS: i128 = 1_000_000_000;

fn as_integer(q: &Quantity) -> Option<i64> {
    let n = q.nanos();
    if n % NANOS != 0 {
        return None;
    }
    i64::try_from(n / NANOS).ok()
}

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
) -> Option<CallResult> {
    use EvalValue as V;
    match (name, target, args) {
        ("quantity", None, [V::String(s)]) => {
            return Some(
                Quantity::parse(s)
                    .map(|q| V::Quantity(Arc::new(q)))
                    .map_err(|e| EvalError::Other(e.to_string())),
            );
        }
        ("isQuantity", None, [V::String(s)]) => {
            return Some(Ok(V::Bool(Quantity::parse(s).is_ok())));
        }
        _ => {}
    }
    let Some(V::Quantity(q)) = target else {
        return None;
    };
    let other = |v: &V| -> Option<Quantity> {
        match v {
            V::Quantity(o) => Some((**o).clone()),
            V::Int(i) => Some(Quantity::from_value(*i, Format::DecimalSI)),
            _ => None,
        }
    };
    let r = match (name, args) {
        ("sign", []) => Ok(V::Int(i64::from(q.sign()))),
        ("isInteger", []) => Ok(V::Bool(as_integer(q).is_some())),
        ("asInteger", []) => as_integer(q)
            .map(V::Int)
            .ok_or_else(|| EvalError::Other("cannot convert value to integer".into())),
        ("asApproximateFloat", []) => Ok(V::Double(q.as_f64())),
        ("add" | "sub", [o]) => {
            let o = other(o)?;
            let mut sum = (**q).clone();
            if name == "add" {
                sum.add(&o);
            } else {
                sum.sub(&o);
            }
            Ok(V::Quantity(Arc::new(sum)))
        }
        ("compareTo", [V::Quantity(o)]) => Ok(V::Int(match q.nanos().cmp(&o.nanos()) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        })),
        ("isGreaterThan", [V::Quantity(o)]) => Ok(V::Bool(q.nanos() > o.nanos())),
        ("isLessThan", [V::Quantity(o)]) => Ok(V::Bool(q.nanos() < o.nanos())),
        _ => return None,
    };
    Some(r)
}
