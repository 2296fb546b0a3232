//! The tool calls of an assistant [`super::Message`]: each call
//! ([`MessageCall`], its arguments a [`CallArguments`]) borrowed from the
//! stored turn where it can be, and the list of them ([`MessageCalls`]): a
//! slice to every reader, stored without an allocation for the usual
//! single call.
//!
//! Why: a rebuilt transcript of 100k turns has ~50k assistant messages of
//! one call each; a `Vec` per message was 50k allocations and ~5 MB of
//! fresh heap per rebuild, and with glibc's default trimming each rebuild
//! faults that memory in again (page faults were the largest item of the
//! profile). One call is kept inline; none or several in a `Vec` (none
//! does not allocate).

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::{ToolArguments, ToolCall};

/// A view of a `Cow` borrowed from it (no copy).
pub(super) fn view(c: &str) -> Cow<'_, str> {
    Cow::Borrowed(c)
}

/// A tool call of a rebuilt assistant message, borrowed from the stored
/// turn where it can be (see [`CallArguments`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageCall<'a> {
    pub id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub arguments: CallArguments<'a>,
}

impl MessageCall<'_> {
    /// The same call borrowed from this one.
    pub fn reborrow(&self) -> MessageCall<'_> {
        MessageCall {
            id: view(&self.id),
            name: view(&self.name),
            arguments: match &self.arguments {
                CallArguments::Json(map) => CallArguments::Json(Cow::Borrowed(map.as_ref())),
                CallArguments::Raw(text) => CallArguments::Raw(view(text)),
            },
        }
    }

    pub fn into_owned(self) -> MessageCall<'static> {
        MessageCall {
            id: Cow::Owned(self.id.into_owned()),
            name: Cow::Owned(self.name.into_owned()),
            arguments: self.arguments.into_owned(),
        }
    }

    /// The call as an owned [`ToolCall`].
    pub fn to_tool_call(&self) -> ToolCall {
        ToolCall {
            id: self.id.clone().into_owned(),
            name: self.name.clone().into_owned(),
            arguments: self.arguments.to_tool_arguments(),
        }
    }
}

impl From<ToolCall> for MessageCall<'static> {
    fn from(call: ToolCall) -> Self {
        MessageCall {
            id: Cow::Owned(call.id),
            name: Cow::Owned(call.name),
            arguments: call.arguments.into(),
        }
    }
}

impl<'a> From<&'a ToolCall> for MessageCall<'a> {
    fn from(call: &'a ToolCall) -> Self {
        MessageCall {
            id: Cow::Borrowed(&call.id),
            name: Cow::Borrowed(&call.name),
            arguments: match &call.arguments {
                ToolArguments::Json(map) => CallArguments::Json(Cow::Borrowed(map)),
                ToolArguments::Raw(text) => CallArguments::Raw(Cow::Borrowed(text)),
            },
        }
    }
}

/// A call's arguments as stored ([`ToolArguments`] without the copy): a
/// JSON object, or the text the model sent when it was not one. Kept as
/// the stored JSON until an adapter writes its request.
#[derive(Debug, Clone, PartialEq)]
pub enum CallArguments<'a> {
    Json(Cow<'a, Map<String, Value>>),
    Raw(Cow<'a, str>),
}

impl<'a> CallArguments<'a> {
    /// Reads a stored `arguments` value in place; `None` for shapes no
    /// writer produces (what [`ToolArguments::from_stored`] refuses).
    pub fn from_stored(value: &'a Value) -> Option<Self> {
        match value {
            Value::Object(map) => Some(CallArguments::Json(Cow::Borrowed(map))),
            Value::String(text) => Some(CallArguments::Raw(Cow::Borrowed(text))),
            _ => None,
        }
    }

    /// The arguments as text, as the model sent them
    /// ([`ToolArguments::as_sent`]).
    pub fn as_sent(&self) -> Cow<'_, str> {
        match self {
            CallArguments::Json(map) => {
                Cow::Owned(serde_json::to_string(map.as_ref()).unwrap_or_else(|_| "{}".to_owned()))
            }
            CallArguments::Raw(text) => Cow::Borrowed(text),
        }
    }

    /// Whether the model's arguments were a well-formed JSON object.
    pub fn is_valid_json(&self) -> bool {
        matches!(self, CallArguments::Json(_))
    }

    pub fn into_owned(self) -> CallArguments<'static> {
        match self {
            CallArguments::Json(map) => CallArguments::Json(Cow::Owned(map.into_owned())),
            CallArguments::Raw(text) => CallArguments::Raw(Cow::Owned(text.into_owned())),
        }
    }

    pub fn to_tool_arguments(&self) -> ToolArguments {
        match self {
            CallArguments::Json(map) => ToolArguments::Json(map.clone().into_owned()),
            CallArguments::Raw(text) => ToolArguments::Raw(text.clone().into_owned()),
        }
    }
}

impl From<ToolArguments> for CallArguments<'static> {
    fn from(arguments: ToolArguments) -> Self {
        match arguments {
            ToolArguments::Json(map) => CallArguments::Json(Cow::Owned(map)),
            ToolArguments::Raw(text) => CallArguments::Raw(Cow::Owned(text)),
        }
    }
}

/// The stored form: the object, or a JSON string holding the raw text
/// (what [`ToolArguments::to_stored`] writes).
impl Serialize for CallArguments<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CallArguments::Json(map) => map.serialize(s),
            CallArguments::Raw(text) => text.serialize(s),
        }
    }
}

/// The calls of one message; see the module docs. Build it with `From<Vec<_>>`, `collect()` or
/// [`MessageCalls::one`]; read it as a `[MessageCall]`.
#[derive(Clone, Default)]
pub struct MessageCalls<'a>(Repr<'a>);

#[derive(Clone)]
enum Repr<'a> {
    One(MessageCall<'a>),
    Many(Vec<MessageCall<'a>>),
}

impl Default for Repr<'_> {
    fn default() -> Self {
        Repr::Many(Vec::new())
    }
}

impl<'a> MessageCalls<'a> {
    /// No calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// A single call, without an allocation.
    pub fn one(call: MessageCall<'a>) -> Self {
        MessageCalls(Repr::One(call))
    }

    /// Moves the calls out of `buffer` (left empty, its capacity kept for
    /// the next message): inline for one call, an exact-size `Vec` for more.
    pub fn take_from(buffer: &mut Vec<MessageCall<'a>>) -> Self {
        if buffer.len() == 1
            && let Some(call) = buffer.pop()
        {
            return Self::one(call);
        }
        // Not `mem::take`: the message gets an exact-size copy and the
        // buffer keeps its capacity for the next turn (none: no allocation).
        #[allow(clippy::drain_collect)]
        let calls = buffer.drain(..).collect();
        MessageCalls(Repr::Many(calls))
    }

    /// The same calls owning everything they hold.
    pub fn into_owned(self) -> MessageCalls<'static> {
        MessageCalls(match self.0 {
            Repr::One(call) => Repr::One(call.into_owned()),
            Repr::Many(calls) => {
                Repr::Many(calls.into_iter().map(MessageCall::into_owned).collect())
            }
        })
    }
}

impl<'a> Deref for MessageCalls<'a> {
    type Target = [MessageCall<'a>];

    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Repr::One(call) => std::slice::from_ref(call),
            Repr::Many(calls) => calls,
        }
    }
}

impl DerefMut for MessageCalls<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match &mut self.0 {
            Repr::One(call) => std::slice::from_mut(call),
            Repr::Many(calls) => calls,
        }
    }
}

impl<'a> From<Vec<MessageCall<'a>>> for MessageCalls<'a> {
    fn from(mut calls: Vec<MessageCall<'a>>) -> Self {
        if calls.len() == 1
            && let Some(call) = calls.pop()
        {
            return Self::one(call);
        }
        MessageCalls(Repr::Many(calls))
    }
}

impl<'a> FromIterator<MessageCall<'a>> for MessageCalls<'a> {
    fn from_iter<I: IntoIterator<Item = MessageCall<'a>>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return Self::new();
        };
        let Some(second) = iter.next() else {
            return Self::one(first);
        };
        let mut calls = Vec::with_capacity(iter.size_hint().0.saturating_add(2));
        calls.push(first);
        calls.push(second);
        calls.extend(iter);
        MessageCalls(Repr::Many(calls))
    }
}

impl<'s, 'a> IntoIterator for &'s MessageCalls<'a> {
    type Item = &'s MessageCall<'a>;
    type IntoIter = std::slice::Iter<'s, MessageCall<'a>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Calls compare as the slices they are, however stored.
impl PartialEq for MessageCalls<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for MessageCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call(id: &str) -> MessageCall<'static> {
        ToolCall {
            id: id.to_owned(),
            name: "t".to_owned(),
            arguments: ToolArguments::from_model("{}"),
        }
        .into()
    }

    #[test]
    fn one_call_is_inline_and_reads_as_a_slice() {
        let one = MessageCalls::one(call("a"));
        assert!(matches!(one.0, Repr::One(_)));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].id, "a");
        let from_vec = MessageCalls::from(vec![call("a")]);
        assert!(matches!(from_vec.0, Repr::One(_)));
        assert_eq!(one, from_vec);
        assert!(MessageCalls::new().is_empty());
        assert_eq!(format!("{:?}", MessageCalls::new()), "[]");
    }

    proptest! {
        /// However built (vector, iterator, buffer), the calls are the
        /// same slice, compare equal exactly when the slices do, and an
        /// owned copy is equal.
        #[test]
        fn every_construction_is_the_same_slice(
            ids in proptest::collection::vec("[a-c\0é]{0,3}", 0..5),
            other in proptest::collection::vec("[a-c\0é]{0,3}", 0..5),
        ) {
            let calls: Vec<MessageCall<'static>> = ids.iter().map(|i| call(i)).collect();
            let from_vec = MessageCalls::from(calls.clone());
            let collected: MessageCalls<'_> = calls.iter().cloned().collect();
            let mut buffer = calls.clone();
            let taken = MessageCalls::take_from(&mut buffer);
            prop_assert!(buffer.is_empty());
            for built in [&from_vec, &collected, &taken] {
                prop_assert_eq!(&**built, calls.as_slice());
                prop_assert_eq!(matches!(built.0, Repr::One(_)), calls.len() == 1);
            }
            prop_assert_eq!(from_vec.clone().into_owned(), from_vec.clone());
            let others: MessageCalls<'_> = other.iter().map(|i| call(i)).collect();
            prop_assert_eq!(others == from_vec, other == ids);
            let mut renamed = from_vec.clone();
            if let Some(first) = renamed.first_mut() {
                first.id = "z".into();
                prop_assert_eq!(renamed.first().map(|c| c.id.as_ref()), Some("z"));
            }
        }
    }
}
